// Package golden reads and writes files of events: the golden histories a
// generator on the commands side writes (internal/history), which the
// projections' tests and benchmarks read, so that the fold is tested on
// histories the master could write without importing the decider. They
// double as upcasting fixtures: a file written under an older catalogue
// must still decode.
//
// A file is gzip'd JSON lines, one event each, with the payload as the
// catalogue's protobuf bytes (events.Encode) in base64. Writing the same
// events writes the same bytes.
package golden
