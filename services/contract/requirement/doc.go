// Package requirement turns a tool's declared Requirement (an action and a
// resource template such as "file:{path}") into the concrete action and
// resource one call needs, from that call's arguments.
//
// The capability check is resource + action + context resolved at call time,
// not "grant → tool": files.read(path="/public/a.txt") and
// files.read(path="/private/a.txt") are one tool needing different authority.
// The resolved resource is what the policy decides on, so it must name the
// object the handler will actually touch. Placeholder values are therefore
// cleaned before substitution: with POSIX cleaning (the default when a
// registration leaves path_cleaning unspecified) a backslash is a separator
// and the value is made absolute and lexically cleaned, so
// "/public/../private/a.txt" and "\public\..\private\a.txt" both become
// "/private/a.txt" and a policy written for "/public/" prefixes cannot be
// walked out of. Cleaning never decodes anything ("%2e%2e" and U+FF0E stay
// literal): the handler receives the same bytes and finds no such directory.
//
// A NUL byte in a placeholder value is rejected whatever the cleaning rule:
// it truncates paths in C-backed file APIs and cannot be stored in
// PostgreSQL text.
package requirement
