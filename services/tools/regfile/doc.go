// Package regfile reads tool registration files (YAML or JSON: one
// registration or a list) in the shape `sharedosctl tools register -f` and
// `make run` accept, and turns them into ToolRegistration messages.
//
// The keys are a contract: name, description, inputSchema, outputSchema,
// annotations, metadata (namespace, source), class (default managed),
// requirement (action, resource, openArguments), handler (target, timeout). An unknown key,
// at any level, is an error naming it. JSON files keep their schema bytes
// verbatim; YAML files are converted to JSON (key order becomes sorted).
package regfile
