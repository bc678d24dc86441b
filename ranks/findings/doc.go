// Package findings is how a world collects what its checks find: the
// [Finding] record (kind, message, ranks, ops, streams, resource) the
// checker, the reports and the JSON output read, and the [Log] of one run
// — every finding counted by kind, at most a cap of each kind kept,
// duplicates dropped by [Key], a group's reports gathered into one
// finding — and [KeySet], the allocation-light set the world's race
// checks de-duplicate their pairs with.
//
// It imports nothing. What a finding says is the world's to write
// (package ranks formats race and mismatch messages lazily, from the
// tasks and memory it names: ranks/findmsg.go).
package findings
