package main

import (
	"slices"
	"strings"
	"testing"
)

// A method nothing calls on a type that reaches fmt is listed; one fmt
// calls through an interface, and one main calls, are not. deadcode alone
// lists none of the three.
func TestListsTheMethodOnlyReflectionKeeps(t *testing.T) {
	t.Chdir("testdata/printed")
	lines, err := run([]string{"./..."})
	if err != nil {
		t.Fatal(err)
	}
	want := "main.go:9:20: reached only by reflection: Placement.Twin"
	if !slices.Contains(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	for _, l := range lines {
		if strings.Contains(l, "Placement.String") || strings.Contains(l, "Placement.Used") {
			t.Errorf("listed a method that is called: %s", l)
		}
	}
}
