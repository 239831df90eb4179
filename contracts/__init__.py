"""Wire formats at the edges: resource identities, JSON Schemas, CRD schemas, the event-log converter."""
