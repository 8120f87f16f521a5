// Package args checks the arguments of a tools/call against the tool's own
// inputSchema, before the call is forwarded. It is pure: no I/O, no
// network, no files.
//
// Compile turns an inputSchema into a *Schema once (the caller caches it per
// tool hash); Check runs on every call and returns the arguments to forward
// (nil when unchanged), warnings for the coercions it applied, and problems
// that refuse the call, each worded for the model and naming the argument.
//
// # Schemas
//
// JSON Schema draft 2020-12 when "$schema" is absent; drafts 4, 6, 7 and
// 2019-09 when "$schema" names them (github.com/santhosh-tekuri/jsonschema/v6).
// Nothing outside the schema is ever loaded: a $ref or $schema that resolves
// outside the document (http, https, file, a relative path, a URN no $id
// inside defines) is ErrExternalRef. The top must be an object schema. Size,
// depth, subschema count, number literals and the number of subschemas one
// value can be checked against are bounded (see the Max… constants), so a
// hostile upstream cannot make Compile or Check slow; patterns use Go's
// regexp (RE2, linear time) and one it cannot compile is ErrInvalidSchema.
//
// # Unknown arguments
//
// A top-level argument the schema does not declare is refused
// (unknown_argument, with Allowed = Properties()) whatever the schema's
// additionalProperties says: naive upstream schemas omit
// "additionalProperties": false and silently ignore extra fields, and a
// model that sent an ignored field believes it set something. Declared
// means named in "properties" of the root or of a schema the root
// references or combines (allOf, anyOf, oneOf, if/then/else, dependent
// schemas), or matching a top-level "patternProperties". A schema with no
// "properties" anywhere there (a free-form map) gets plain JSON Schema rules.
// Below the top level only the schema's own rules apply: a nested object is
// closed only where its schema says "additionalProperties": false (or
// "unevaluatedProperties": false); the problem then lists that object's
// declared members.
//
// # Coercions
//
// Applied before validation to string values only, where the schemas that
// must all hold at that position (the property's schema, its $ref target
// and allOf members, recursively; anyOf/oneOf alternatives never count)
// leave exactly one non-string type; each is reported as a Warning:
//
//   - boolean: exactly "true" or "false" (coerced_boolean).
//   - integer: JSON number syntax without exponent, no "+", no white space,
//     no leading zeros, optionally a zero fraction: "5", "-12", "5.0" → 5
//     (coerced_integer). "5.5", "1e3", " 5", "+5", "05" are not coerced.
//   - number: exactly a JSON number: "5", "-0.5", "1e-3" (coerced_number).
//   - array / object: a string whose trimmed text is a JSON array / object,
//     parsed strictly (parsed_array, parsed_object); coercion then continues
//     inside the parsed value.
//   - enum synonym: a string equal to exactly one string enum value after
//     trimming white space, folding case and reading '-' and ' ' as '_'
//     ("In Progress" → "in_progress") (enum_synonym). Only when
//     Options.Write is false: a write never fuzzy-matches.
//
// Numbers are never turned into strings, nor anything into anything else.
// A string that does not coerce stays as it is and validation reports it
// (wrong_type, no warning). Coercion reaches every depth the arguments have
// (at most MaxArgumentDepth): object members through "properties",
// "patternProperties" and schema-valued "additionalProperties", array items
// through "items", "prefixItems" and "additionalItems".
//
// Arguments holds the re-encoded object only when something was coerced:
// member order and every untouched value are kept as sent.
package args
