//! The kinds of provider: what each one is called, shown as and asks for in the form. The UI's
//! kind list and badges are read from here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Upstream API kinds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// Any OpenAI Chat Completions compatible API (OpenAI, OpenRouter, Groq, DeepSeek, Ollama, vLLM…).
    OpenaiCompatible,
    /// OpenAI's Responses API (`POST {baseUrl}/responses`), for models only it serves.
    OpenaiResponses,
    /// Anthropic's Messages API (`baseUrl` e.g. `https://api.anthropic.com/v1`).
    Anthropic,
    /// Gemini's native API (`baseUrl` e.g. `https://generativelanguage.googleapis.com/v1beta`).
    Gemini,
    /// Azure OpenAI: Chat Completions on a company's Azure resource (`baseUrl` its endpoint,
    /// `https://NAME.openai.azure.com`, or `…/openai/v1`); models are deployment names.
    AzureOpenai,
    /// AWS Bedrock: Anthropic's Messages API on a company's AWS account (`baseUrl`
    /// `https://bedrock-runtime.REGION.amazonaws.com`); models are Bedrock model ids or
    /// inference profiles; SigV4 or a Bedrock API key.
    Bedrock,
    /// Google Vertex AI: Anthropic's Messages API on a company's Google Cloud project (`baseUrl`
    /// `https://REGION-aiplatform.googleapis.com/v1`, with `project`); models are Vertex model
    /// ids (`claude-sonnet-4-5@20250929`); OAuth access tokens.
    VertexAnthropic,
    /// Google Vertex AI: Gemini's API on a company's Google Cloud project (as
    /// `vertex-anthropic`; models are Gemini model ids).
    VertexGemini,
    /// The Claude Code CLI (`claude -p`), using its own subscription login.
    ClaudeCli,
    /// The Codex CLI (`codex exec`), using its own ChatGPT login.
    CodexCli,
    /// The Gemini CLI (`gemini -p`), using its own Google login or key.
    GeminiCli,
}

impl ProviderKind {
    /// The format an HTTP provider speaks; `None` for subscription CLIs.
    pub fn wire(self) -> Option<crate::canonical::Wire> {
        use crate::canonical::Wire;
        match self {
            ProviderKind::OpenaiCompatible => Some(Wire::OpenAi),
            ProviderKind::OpenaiResponses => Some(Wire::Responses),
            ProviderKind::Anthropic => Some(Wire::Anthropic),
            ProviderKind::Gemini => Some(Wire::Gemini),
            ProviderKind::AzureOpenai => Some(Wire::OpenAi),
            ProviderKind::Bedrock => Some(Wire::Anthropic),
            ProviderKind::VertexAnthropic => Some(Wire::Anthropic),
            ProviderKind::VertexGemini => Some(Wire::Gemini),
            ProviderKind::ClaudeCli | ProviderKind::CodexCli | ProviderKind::GeminiCli => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenaiCompatible => "openai-compatible",
            ProviderKind::OpenaiResponses => "openai-responses",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
            ProviderKind::AzureOpenai => "azure-openai",
            ProviderKind::Bedrock => "bedrock",
            ProviderKind::VertexAnthropic => "vertex-anthropic",
            ProviderKind::VertexGemini => "vertex-gemini",
            ProviderKind::ClaudeCli => "claude-cli",
            ProviderKind::CodexCli => "codex-cli",
            ProviderKind::GeminiCli => "gemini-cli",
        }
    }

    /// Whether this kind runs a local subscription CLI instead of calling an HTTP API.
    pub fn is_cli(self) -> bool {
        self.cli_program().is_some()
    }

    /// The variables a CLI provider's `env` may set: the ones that CLI documents for its own
    /// configuration directory and its own keys. Nothing else: loader and runtime options
    /// (`NODE_OPTIONS`, `LD_PRELOAD`, `GIT_CONFIG_*`…) would let whoever edits a provider run
    /// code, and base-URL and proxy variables would send the CLI's login elsewhere.
    pub fn cli_env_allowed(self) -> &'static [&'static str] {
        match self {
            ProviderKind::ClaudeCli => &[
                "CLAUDE_CONFIG_DIR",
                "ANTHROPIC_API_KEY",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ],
            ProviderKind::CodexCli => &["CODEX_HOME", "OPENAI_API_KEY", "CODEX_API_KEY"],
            ProviderKind::GeminiCli => &[
                "GEMINI_CLI_HOME",
                "GEMINI_API_KEY",
                "GOOGLE_API_KEY",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "GOOGLE_GENAI_USE_VERTEXAI",
            ],
            _ => &[],
        }
    }

    /// The CLI's program name on `PATH`, for the CLI kinds.
    pub const ALL: [ProviderKind; 11] = [
        ProviderKind::OpenaiCompatible,
        ProviderKind::OpenaiResponses,
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
        ProviderKind::AzureOpenai,
        ProviderKind::Bedrock,
        ProviderKind::VertexAnthropic,
        ProviderKind::VertexGemini,
        ProviderKind::ClaudeCli,
        ProviderKind::CodexCli,
        ProviderKind::GeminiCli,
    ];

    /// The kind's name for people (the UI's kind list and badges), translated where it is shown.
    pub fn label(self) -> &'static str {
        match self {
            ProviderKind::OpenaiCompatible => crate::i18n::n_("OpenAI-compatible API"),
            ProviderKind::OpenaiResponses => crate::i18n::n_("OpenAI Responses API"),
            ProviderKind::Anthropic => crate::i18n::n_("Anthropic API"),
            ProviderKind::Gemini => crate::i18n::n_("Gemini API"),
            ProviderKind::AzureOpenai => crate::i18n::n_("Azure OpenAI"),
            ProviderKind::Bedrock => crate::i18n::n_("AWS Bedrock"),
            ProviderKind::VertexAnthropic => crate::i18n::n_("Claude on Google Vertex AI"),
            ProviderKind::VertexGemini => crate::i18n::n_("Gemini on Google Vertex AI"),
            ProviderKind::ClaudeCli => crate::i18n::n_("Claude Code CLI"),
            ProviderKind::CodexCli => crate::i18n::n_("Codex CLI"),
            ProviderKind::GeminiCli => crate::i18n::n_("Gemini CLI"),
        }
    }

    /// Its badge: two letters at most.
    pub fn badge(self) -> &'static str {
        match self {
            ProviderKind::OpenaiCompatible => "AI",
            ProviderKind::OpenaiResponses => "R",
            ProviderKind::Anthropic => "A",
            ProviderKind::Gemini => "G",
            ProviderKind::AzureOpenai => "Az",
            ProviderKind::Bedrock => "Bk",
            ProviderKind::VertexAnthropic => "Vx",
            ProviderKind::VertexGemini => "VG",
            ProviderKind::ClaudeCli => "CC",
            ProviderKind::CodexCli => "CX",
            ProviderKind::GeminiCli => "GC",
        }
    }

    /// What an HTTP kind's `baseUrl` looks like, for the form's hint.
    pub fn base_url_example(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenaiCompatible => Some("https://api.groq.com/openai/v1"),
            ProviderKind::OpenaiResponses => Some("https://api.openai.com/v1"),
            ProviderKind::Anthropic => Some("https://api.anthropic.com/v1"),
            ProviderKind::Gemini => Some("https://generativelanguage.googleapis.com/v1beta"),
            ProviderKind::AzureOpenai => Some("https://NAME.openai.azure.com"),
            ProviderKind::Bedrock => Some("https://bedrock-runtime.us-east-1.amazonaws.com"),
            ProviderKind::VertexAnthropic => Some("https://us-east5-aiplatform.googleapis.com/v1"),
            ProviderKind::VertexGemini => Some("https://us-central1-aiplatform.googleapis.com/v1"),
            _ => None,
        }
    }

    /// The fields of its own it takes beside the common ones, as the form shows them.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            ProviderKind::Bedrock => &["region"],
            ProviderKind::VertexAnthropic | ProviderKind::VertexGemini => &["project", "region"],
            _ => &[],
        }
    }

    /// Whether a key of its may be a credentials file's JSON (a Google service account's key).
    pub fn takes_credentials_file(self) -> bool {
        matches!(
            self,
            ProviderKind::VertexAnthropic | ProviderKind::VertexGemini
        )
    }

    /// Whether it can call with the client's own login (`credentials: "client"`): the vendors
    /// whose subscriptions clients log in to.
    pub fn takes_client_login(self) -> bool {
        matches!(
            self,
            ProviderKind::OpenaiCompatible
                | ProviderKind::OpenaiResponses
                | ProviderKind::Anthropic
                | ProviderKind::Gemini
        )
    }

    /// A model a CLI kind takes, for the form's hint.
    pub fn sample_model(self) -> Option<&'static str> {
        match self {
            ProviderKind::ClaudeCli => Some("sonnet"),
            ProviderKind::CodexCli => Some("gpt-5-codex"),
            ProviderKind::GeminiCli => Some("gemini-2.5-pro"),
            _ => None,
        }
    }

    pub fn cli_program(self) -> Option<&'static str> {
        match self {
            ProviderKind::ClaudeCli => Some("claude"),
            ProviderKind::CodexCli => Some("codex"),
            ProviderKind::GeminiCli => Some("gemini"),
            _ => None,
        }
    }
}
