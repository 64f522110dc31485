# A policy whose behaviour is chosen by input.tool.name, so one server can
# exercise every branch of the decision contract.
package sharedos.authz

import rego.v1

decision := {"allow": true, "reason": "probe allow"} if input.tool.name == "probe.allow"

decision := {"allow": false, "reason": "probe deny"} if input.tool.name == "probe.deny"

# allow is not a boolean: must be a deny.
decision := {"allow": "yes", "reason": "allow is a string"} if input.tool.name == "probe.malformed"

# decision is not an object: must be a deny.
decision := "allow" if input.tool.name == "probe.notobject"

# startswith on a number is a type error; with strict builtin errors it must
# surface as an evaluation error, not as undefined (deny).
decision := {"allow": startswith(input.arguments.path, "/"), "reason": "typed"} if input.tool.name == "probe.typeerror"

# Two values for one complete rule: an evaluation error.
decision := {"allow": true, "reason": "a"} if input.tool.name == "probe.conflict"

decision := {"allow": false, "reason": "b"} if input.tool.name == "probe.conflict"

# The big integer must reach Rego with its exact decimal text.
decision := {"allow": true, "reason": "exact"} if {
	input.tool.name == "probe.bignum"
	json.marshal(input.arguments.n) == "12345678901234567890"
	input.arguments.n == 12345678901234567890
}

decision := {"allow": false, "reason": json.marshal(input.arguments.n)} if {
	input.tool.name == "probe.bignum"
	json.marshal(input.arguments.n) != "12345678901234567890"
}

# Never finishes on its own: only cancellation or the eval timeout stop it.
decision := {"allow": true, "reason": "slow"} if {
	input.tool.name == "probe.slow"
	some i in numbers.range(1, 100000)
	some j in numbers.range(1, 100000)
	i * j == -1
}

# Anything else (probe.undefined) leaves decision undefined: a deny.

# An evaluation error that quotes an argument value (to_number of a word):
# the decision log must show the value only as a digest.
decision := {"allow": to_number(input.arguments.v) > 0, "reason": "number"} if input.tool.name == "probe.quote"
