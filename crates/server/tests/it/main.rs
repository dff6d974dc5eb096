//! Integration tests of the throng server, one binary. Each module reads as
//! a part of the spec: REST routes, the gateway state machine, resume,
//! intents, fan-out order, durability.

mod cluster;
mod common;
mod compat;
mod durability;
// #30: kill -9 of cluster nodes under load
mod failover;
mod gateway;
mod logs;
mod member_list;
mod openapi;
// #31: passive sessions in large guilds
mod passive;
mod pg_restart;
mod postgres;
mod reactions;
mod read_states;
mod rest;
mod roles;
mod search;
// #29: `throng seed --messages`, the search benchmark's data
mod seed_messages;
// The security suite (issue 25); scripts/test.sh runs it as its own step.
mod security;
mod write_failures;
// #14: attachments, webhooks
mod attachments;
mod audit;
mod authz;
mod webhooks;
// DMs, threads, application commands (#14):
mod commands;
mod dms;
mod threads;
// #27: interactions
mod interactions;
// #25: the HTTP edge and files (signed URLs, uploads judged from the head,
// quota, body deadline, connection caps)
mod security_http;
