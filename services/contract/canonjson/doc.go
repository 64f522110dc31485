// Package canonjson implements the JSON Canonicalization Scheme of RFC 8785
// (JCS), the canonical form catalogHash is computed over
// (shared/spec/catalog-hash.md).
//
// It is written here rather than imported because its output is a contract:
// two implementations of catalogHash that differ by one escaped character
// agree on nothing, so every rule below is ours to test and to keep.
//
//   - Object members are sorted by their keys as UTF-16 code units (not
//     UTF-8 bytes: U+1F600 sorts before U+E000 because its high surrogate
//     0xD83D is smaller).
//   - No insignificant whitespace.
//   - Strings are escaped only for '"', '\' and controls below U+0020, with
//     the short forms \b \f \n \r \t and otherwise \u00xx in lowercase hex;
//     '<', '>', '&', U+2028, U+2029 and all other non-ASCII are written as
//     UTF-8. (encoding/json escapes <>& and U+2028 — it is not JCS.)
//   - Numbers are IEEE 754 doubles written the way ECMAScript's
//     Number.prototype.toString writes them: 1e+21, 1e-7, 0.000001, 4.5,
//     100, and -0 as 0.
//
// Inputs that JCS cannot give one meaning to are refused, never repaired:
// invalid JSON, invalid UTF-8, escaped lone surrogates, duplicate object
// keys, numbers outside the double range, and nesting deeper than MaxDepth.
// Errors are *Error values carrying the byte offset and one of the Err*
// kinds, for errors.Is.
//
// The parser is a single pass that writes the canonical form as it reads;
// an object's members are reordered only when they were not already in
// order, so canonicalizing already-canonical text costs one copy.
package canonjson
