-- API keys (jobq.api_keys). Creating or revoking a key announces it on `jobq_keys`
-- (`created <lookup id>`, `revoked <lookup id>`), so every replica drops its cache.


-- name: create_key
-- Store a new key's digest; no row when its name (or, rarely, its lookup id) is taken.
WITH created AS (
    INSERT INTO jobq.api_keys (name, lookup_id, secret_hash, scopes, queues)
    VALUES (:name, :lookup_id, :secret_hash, CAST(:scopes AS text[]),
            CAST(:queues AS text[]))
    ON CONFLICT DO NOTHING
    RETURNING *
),
announced AS MATERIALIZED (
    SELECT pg_notify('jobq_keys', 'created ' || lookup_id) FROM created
)
SELECT created.* FROM created CROSS JOIN (SELECT count(*) FROM announced) AS announcements;


-- name: revoke_key
-- Revoke a key by name (a second revocation keeps the first time), and tell every replica.
WITH revoked AS (
    UPDATE jobq.api_keys
       SET revoked_at = coalesce(revoked_at, now())
     WHERE name = :name
    RETURNING *
),
announced AS MATERIALIZED (
    SELECT pg_notify('jobq_keys', 'revoked ' || lookup_id) FROM revoked
)
SELECT revoked.* FROM revoked CROSS JOIN (SELECT count(*) FROM announced) AS announcements;


-- name: get_key
-- The key with this lookup id (the public part of the key).
SELECT * FROM jobq.api_keys WHERE lookup_id = :lookup_id;


-- name: get_key_by_name
-- The key with this name.
SELECT * FROM jobq.api_keys WHERE name = :name;


-- name: list_keys
-- Every key, revoked ones too, by name.
SELECT * FROM jobq.api_keys ORDER BY name;


-- name: any_key
-- Was any key ever created? (Revoked keys count: revoking never reopens the service.)
SELECT EXISTS (SELECT FROM jobq.api_keys);


-- name: touch_key
-- Record that a key was just used.
UPDATE jobq.api_keys SET last_used_at = now() WHERE id = :key_id;
