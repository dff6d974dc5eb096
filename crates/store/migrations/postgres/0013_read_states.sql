-- Read states (issue #29): per person and channel (a DM's too), the last
-- message they read and how many mentions of them came after it. Written
-- in batches by the node's read-state writer (acks; mention counts after
-- a message commits), read at IDENTIFY for READY's `read_state`. Rows go
-- with their channel.
CREATE TABLE read_states (
    user_id            BIGINT NOT NULL,
    channel_id         BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    last_message_id    BIGINT NOT NULL DEFAULT 0,
    mention_count      BIGINT NOT NULL DEFAULT 0,
    last_pin_timestamp BIGINT,
    PRIMARY KEY (user_id, channel_id)
);
CREATE INDEX read_states_by_channel ON read_states (channel_id);
