"""HTTP plumbing under the routes: auth, body limit, hosts, origins, redaction, access log."""
