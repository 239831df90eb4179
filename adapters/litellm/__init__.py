"""LiteLLM adapter: the admin-API client, the writer (executor), the /model/info observer and a fake proxy."""
