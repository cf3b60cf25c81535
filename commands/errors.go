package commands

import (
	"errors"
	"fmt"
	"strings"
)

// Code classifies a refusal so the API can map it to a gRPC status code
// without the core importing grpc. The names are gRPC's.
type Code int8

const (
	Unknown            Code = iota
	InvalidArgument         // the command is malformed: fix the request
	FailedPrecondition      // the cell is not in a state that allows it: change the cell first
	PermissionDenied        // the actor may not do this
	ResourceExhausted       // over quota or over the cell's capacity
	NotFound                // the job, task, machine or alloc set does not exist
	AlreadyExists           // the name is taken
	Aborted                 // lost a race (stale placements); retry against a newer state
	Unauthenticated         // no identity
)

var codeNames = [...]string{"Unknown", "InvalidArgument", "FailedPrecondition", "PermissionDenied",
	"ResourceExhausted", "NotFound", "AlreadyExists", "Aborted", "Unauthenticated"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// FieldError is one violation: the field's path as written in a spec file
// (`tasks[3].resources.memory`) and why it is wrong (`must be > 0`).
type FieldError struct {
	Field  string
	Reason string
}

func (f FieldError) String() string {
	if f.Field == "" {
		return f.Reason
	}
	return f.Field + ": " + f.Reason
}

// Error is every refusal of Decide and of spec decoding. Details lists
// every violation of an invalid spec, so a user fixes them all in one go.
type Error struct {
	Code    Code
	Field   string // the field at fault, "" when the command as a whole is
	Msg     string
	Details []FieldError
}

func (e *Error) Error() string {
	if len(e.Details) > 0 {
		parts := make([]string, len(e.Details))
		for i, d := range e.Details {
			parts[i] = d.String()
		}
		return strings.Join(parts, "; ")
	}
	if e.Field != "" {
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

// CodeOf returns the code of a refusal, Unknown for other errors and nil.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Unknown
}

func refuse(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) *Error {
	return refuse(InvalidArgument, field, format, args...)
}

// violations collects field errors; err returns them as one InvalidArgument.
type violations []FieldError

func (v *violations) add(field, format string, args ...any) {
	*v = append(*v, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (v violations) err() error {
	if len(v) == 0 {
		return nil
	}
	return &Error{Code: InvalidArgument, Field: v[0].Field, Msg: v[0].Reason, Details: v}
}
