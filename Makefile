# Convenience targets; scripts/test.sh is what CI runs.
.PHONY: bench test

# Load, cost and streaming figures (README "Performance"). Extra flags:
# make bench BENCHFLAGS="-n 300000 -c 8 -modes floor,proxy"
bench:
	go run ./e2e/bench $(BENCHFLAGS)

test:
	scripts/test.sh
