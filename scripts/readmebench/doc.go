// Command readmebench runs the README's Performance table as written: every
// row's command, from the repository's root, in the table's order. The
// table is the one statement of what is measured and how (`make bench`
// runs this), so a row's command that no longer runs fails here, not in
// the hands of whoever next tries to reproduce a figure.
//
//	go run ./scripts/readmebench [-list] [-rows REGEXP] [-readme README.md]
//
// -list prints the commands without running them; -rows keeps the rows
// whose figure (the first column) matches.
package main
