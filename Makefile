# The two commands of the README. Everything else lives in scripts/.
.PHONY: demo test

demo:
	@scripts/bootstrap
	.venv/bin/vllm-governor demo

test:
	scripts/test
