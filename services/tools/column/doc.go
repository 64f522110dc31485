// Package column runs an evidence column against a turn and grades it
// (ADR 0010, our summary of the design record ADR 0014; issue 21).
//
// A manifest (Manifest) says who the run is for (the AccessContext), what
// tool classes it had (the ToolPolicy), what to ask (a prompt, or a script
// of tool calls for the scripted column) and the declared attempts: tool,
// resource and expected outcome. A host configuration (HostConfig),
// supplied by the operator, says how to start each harness and which model
// it was declared to run; SharedOS selects nothing about the model and
// records only the declared string.
//
// Each declared attempt is graded exercised, with the outcome its operation
// record holds, or not_exercised — never manufactured (Grade). A Report
// holds the run's SystemIdentity, the grades, every operation of the turn
// and the outcome counts; Compare puts reports side by side and refuses
// columns that were not given the same tool set.
//
// The vendor shapes of the scripted and live columns are package driver's.
package column
