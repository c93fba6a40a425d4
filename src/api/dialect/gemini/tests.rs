//! Unit tests of the Gemini dialect: no HTTP server.
