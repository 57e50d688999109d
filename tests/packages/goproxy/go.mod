module github.com/agent-harness/agent-harness/tests/packages/goproxy

go 1.26.0

require golang.org/x/mod v0.43.0
