-- HTTP interactions (issue #27): an application with an endpoint URL gets
-- its interactions as signed POSTs there instead of over its gateway
-- sessions. NULL: over the gateway.
ALTER TABLE applications ADD COLUMN interactions_endpoint_url TEXT;
