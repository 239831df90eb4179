"""Named constructors: raw Kubernetes / LiteLLM objects in, typed values or typed problems out."""
