# The two commands of the README. Everything else lives in scripts/.
.PHONY: demo test vllm-cpu

demo:
	@scripts/bootstrap
	.venv/bin/vllm-governor demo

test:
	scripts/test

# The real vLLM the test tier runs (CPU build, tiny local model), cached by its inputs.
vllm-cpu:
	scripts/vllm-cpu/build
