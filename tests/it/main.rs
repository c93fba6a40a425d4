//! Baton's integration tests, as one test binary: each module was its own crate, and each of
//! those linked the whole dependency tree (42 links on every change). Helpers: `common`
//! (a gateway on a free port, fake upstreams), `cli` (running the `baton` binary), `redis_pair`
//! (two instances sharing a Redis).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../cli/mod.rs"]
mod cli;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/redis.rs"]
mod redis_pair;

mod admin;
mod admin_edit;
mod admin_secrets;
mod admin_settings;
mod admin_transfer;
mod admission;
mod affinity;
mod anthropic;
mod anthropic_upstream;
mod api;
mod architecture_knots;
mod architecture_map;
mod azure_upstream;
mod bad_input;
mod bad_request_throttle;
mod bedrock_converse;
mod bedrock_upstream;
mod cache_tokens;
mod capture;
mod catalog;
mod chaos;
mod chatgpt_backend;
mod cli_config;
mod cli_keys;
mod cli_lockdown;
mod cli_probe;
mod cli_processes;
mod cli_providers;
mod cli_service;
mod cli_status;
mod client_usage;
mod clients;
mod config;
mod connect;
mod connections;
mod date_boundaries;
mod docs_agree;
mod docs_book;
mod env_file;
mod error_classes;
mod error_contract;
mod fault_scenarios;
mod fuzz;
mod gemini_dialect;
mod gemini_upstream;
mod gemini_wire;
mod hedging;
mod limit_fixtures;
mod limits;
mod local_fallback;
mod log_queue;
mod os_keyring;
mod overage;
mod private_files;
mod proxy;
mod real_clis;
mod real_clis_connect;
mod redaction;
mod responses_upstream;
mod responses_ws;
mod retry_after;
mod routes_admin;
mod routing;
mod shared_dates;
mod shared_leases;
mod shared_permits;
mod shared_state;
mod speed_routing;
mod statusline;
mod stops_and_parallel;
mod stream_breaks;
mod streaming;
mod strict_fakes;
mod structured_output;
mod subscription;
mod telemetry;
mod thinking;
mod timeouts;
mod token_counts;
mod updates;
mod usage;
mod verbatim;
mod vertex_upstream;
mod web_search;
mod web_search_services;
