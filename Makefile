# Convenience targets; scripts/test.sh is what CI runs.
.PHONY: bench test

# Load, cost and streaming figures (docs/operations/performance.md); the
# bench is in the e2e module. Extra flags:
# make bench BENCHFLAGS="-n 300000 -c 8 -modes floor,proxy"
bench:
	cd e2e && go run ./bench $(BENCHFLAGS)

test:
	scripts/test.sh
