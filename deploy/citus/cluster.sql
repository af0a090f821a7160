-- Joins the workers to the coordinator (run on the coordinator, once or again: a node
-- already added is left as it is). `ebbtide distribute` then shards the tables.
SELECT citus_set_coordinator_host('coordinator', 5432);
SELECT citus_add_node(name, 5432)
FROM (VALUES ('worker1'), ('worker2')) AS workers (name)
WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodename = workers.name);
-- Created here, it is created on every worker too (Citus propagates extensions).
CREATE EXTENSION IF NOT EXISTS vector;
SELECT nodename, nodeport, noderole FROM pg_dist_node ORDER BY nodeid;
