"""The VLM metrics' adapters (torch, transformers, the hub's models): imported only when one of
them is built or its cache key is read; which VLM metrics exist, and their files, is
metrics_under_test.vlm_catalog, light, for the registry and `banana-tests metrics`."""
