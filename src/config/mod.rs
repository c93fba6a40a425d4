//! Configuration: the JSON file format (serde + JSON schema), loading with precise error paths,
//! and validation. Everything the router reads is built from these types into a `Snapshot`.

pub mod env_file;
mod error;
mod file;
pub mod kind;
mod load;
mod provider;
mod provider_checks;
pub mod reference;
pub(crate) mod refs;
mod state;
pub mod telemetry;
pub mod validate;
pub mod web_search;

pub use load::{json_schema, load_file, parse_str};

pub use error::ConfigError;
pub use file::*;
pub use kind::ProviderKind;
pub use provider::*;
pub use state::{RedisConfig, StateBackend, StateConfig};
pub use validate::validate;
