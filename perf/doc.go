// Package perf measures collsim's hot paths for `simctl bench`: each row is
// a measurement with, where one exists, a baseline measured in the same run
// (machines are noisy; ratios from one run are what we quote).
//
// Wall-clock time is read here and only here (and in the command that prints
// it): it measures the simulator, it never feeds a simulated result.
package perf
