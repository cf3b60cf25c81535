// A program whose type reaches fmt: Twin is a method only a test would
// call, String one fmt calls through fmt.Stringer, Used one main calls.
package main

import "fmt"

type Placement struct{ Machine string }

func (p Placement) Twin() string   { return "twin of " + p.Machine }
func (p Placement) String() string { return p.Machine }
func (p Placement) Used() string   { return p.Machine }

func main() {
	p := Placement{Machine: "m1"}
	fmt.Println(p, p.Used())
}
