// Command reflectonly lists the exported methods that the shipped binaries
// reach only because their type may be reflected upon: nothing calls them,
// statically or through an interface. The deadcode tool counts such methods
// live (rapid type analysis assumes reflection may call any exported method
// of a type that reaches an interface, and fmt takes any value), so a
// method only tests call hides there whenever its type is ever printed.
// scripts/deadcode-check runs both and holds the output to one allow-list.
//
// Generated code (*.pb.go) is left out: its getters and reflection hooks
// exist for every field whether corral calls them or not. A method that a
// template calls by name is listed too (text/template finds it by
// reflection): the allow-list names those, with the template.
//
// Invariants: it reads the code and writes nothing; its roots are the
// ones deadcode uses (every main package's main and init), so the two
// passes speak of the same binaries; it exits 2 on a load error and 0
// otherwise, leaving the verdict to scripts/deadcode-check's allow-list.
package main
