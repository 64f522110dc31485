// Package catalog is catalog-svc's domain: it validates tool registrations,
// derives each tool's published projection (canonical bytes and digest
// computed once, at write time), keeps an in-memory cache of every published
// tool sorted by name, and computes each access context's effective
// catalogue and catalogHash from that cache.
//
// The cache follows the store's change feed (Postgres LISTEN/NOTIFY across
// replicas), so a registration or deregistration on any replica is visible on
// every replica within a second.
//
// Decisions this package makes (see also the doc comments on the rules):
//   - managed tools must have a provider-qualified name ("github.search"); a
//     harness_local or external_direct tool may be unqualified ("patch").
//   - requirement.action, requirement.resource and handler.target follow
//     the identifier rule (IdentifierSchema) whenever given, for every
//     class; only a managed tool must give them. A prompt's or resource's
//     handler.target is required and follows it too.
//   - metadata.namespace must equal the name's first segment, and be empty
//     for an unqualified name.
//   - two names clash when their collision keys ('.' and '-' read as '_')
//     are equal ignoring case: files_read and Files_Read are both refused
//     next to files.read, GitHub.search next to github.search (toolname.FoldedKey;
//     enforced by a unique index, so concurrent registrations cannot both win).
//   - published text (description, annotations strings, schema titles,
//     descriptions and property names, metadata.source; a prompt's or
//     resource's title and description, a resource's URI or URI template
//     and MIME type) may hold '\n' and '\t' but no other control
//     character (Unicode Cc, so also ESC/ANSI and C1) and no format
//     character (Unicode Cf: bidi controls, zero-width characters, tag
//     characters, ...); the error names the code point. A URI holds no
//     space or control character at all.
//   - a description is at most 16 KiB and metadata.source at most 256
//     bytes (max_length), a tool's as a prompt's or resource's: every
//     listing and every turn's pin carries them.
//   - a resource's URI or URI template is at most 2,048 bytes, and the
//     match key stored with it (resourceuri.Key, in which each byte of a
//     non-ASCII character is percent-encoded) at most 2,560 (max_length):
//     PostgreSQL's index of the keys holds a row of at most 2,704 bytes,
//     and every store refuses alike what one of them could not keep.
//   - input and output schemas must be JSON Schema 2020-12 object schemas
//     ("type": "object" at the top), at most 256 KiB, 32 levels deep and
//     2048 JSON objects, with only local "#..." references; the compiler's
//     loader refuses every URL. No subschema may reach itself through
//     $ref, allOf, anyOf, oneOf, not or if/then/else without descending
//     into the instance (no_ref_cycle): validation would refuse every call
//     that reaches it. Only the top declares the dialect ("$schema"): a
//     subschema that declares one (a draft-07 resource, asserting
//     "format": "regex", in an operator's 2020-12 schema; a remote
//     metaschema, no_network_ref) is refused (no_nested_dialect; a schema
//     stored before is still served).
//   - a schema's regular expressions ("pattern", "patternProperties") are
//     at most MaxRegexBytes (16 KiB) each and compile to at most
//     MaxRegexInsts (2,048) instructions each, its distinct ones together
//     to MaxSchemaRegexInsts (16,384) and with at most
//     MaxSchemaUnicodeClasses (256) Unicode class escapes, \pL and the
//     like, whose tables parsing merges (max_regex_size): matching takes
//     time in proportion to the program for every character of an
//     argument, and compiling builds it in memory. A pattern is sized on
//     its parsed tree before it is built. A draft-07 "format": "regex"
//     holds an argument's string to the same size on every call, checking
//     its syntax without building its program or its Unicode tables.
//     Enforced where a schema is compiled, so a stored schema past it is
//     withheld from calls.
//   - validating a call against a schema costs at most MaxValueVisits (64)
//     subschema visits for any value of its arguments, and at most
//     MaxRegexPerChar (2,048) regex instructions for any character
//     (max_validation_work): counted when the schema is compiled, for the
//     costliest value at every depth down to jsonlimits.MaxDepth, by
//     following the validator ($ref, allOf, anyOf, oneOf, not,
//     if/then/else, dependentSchemas and dynamic references apply theirs
//     to the same value; properties, items and the like to the values
//     beneath). A call's validation is then linear in its arguments; a
//     schema whose $refs double at each level (1.4 KB: 31 s and 10 GB
//     for {}) is refused. Enforced where a schema is compiled, like
//     max_regex_size.
//   - every store keeps the same JSON: a number in a schema or the
//     annotations must fit a double and PostgreSQL's numeric (at most 16383
//     digits after the decimal point as written), number_range; a
//     number of the annotations, which the policy reads, is at most
//     jsonlimits.MaxNumberChars characters as authz-svc takes one; a schema
//     holds no U+0000 in any string or key, no_nul (the annotations none
//     either, as a control character).
//   - no object of a schema or the annotations repeats a key, and no object
//     of the annotations holds two keys that differ only in letter case
//     (readOnlyHint / ReadOnlyHint): unique_keys. Readers that fold case
//     and readers that do not would take different values.
//   - an UpdateTool whose expected_revision does not match is ErrRevisionMismatch
//     (gRPC Aborted: the read-modify-write lost a race; re-read and retry).
//     A new tool starts at revision 1 and each update adds 1; a tool
//     registered again under a deleted tool's name continues from that
//     tool's last revision, so a revision read before the deletion never
//     matches the new tool.
//   - input schemas are compiled on first Resolve (or handed over by the
//     single-tool write that validated them; a batch hands none over), so a
//     replica reloading a large batch stays within the 1 s visibility bound.
//   - ListTools without an access context is the admin listing of every
//     published tool; with one, authz-svc filters (never a global union) and
//     an authz failure fails the call instead of returning tools unfiltered.
package catalog
