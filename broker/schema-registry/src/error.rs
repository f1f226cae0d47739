//! Every refusal of the registry, with Confluent's `error_code` and HTTP status, so
//! clients written for Confluent Schema Registry recognise them.

/// Why a registry request was refused. The codes are Confluent's and never reused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("Subject '{0}' not found.")]
    SubjectNotFound(String),
    #[error("Version {version} not found.")]
    VersionNotFound { subject: String, version: String },
    #[error("{0}")]
    SchemaNotFound(String),
    #[error("Subject '{0}' was soft deleted. Set permanent=true to delete permanently")]
    SubjectSoftDeleted(String),
    #[error("Subject '{0}' was not deleted first before being permanently deleted")]
    SubjectNotSoftDeleted(String),
    #[error(
        "Version {version} of subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
    )]
    VersionSoftDeleted { subject: String, version: i32 },
    #[error(
        "Version {version} of subject '{subject}' was not deleted first before being permanently deleted"
    )]
    VersionNotSoftDeleted { subject: String, version: i32 },
    #[error("Subject '{0}' does not have subject-level compatibility configured")]
    SubjectCompatNotConfigured(String),
    #[error("Subject '{0}' does not have subject-level mode configured")]
    SubjectModeNotConfigured(String),
    /// The proposed schema breaks the subject's compatibility level; one entry per
    /// incompatibility the checker found.
    #[error(
        "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{}]",
        details.join(", ")
    )]
    Incompatible { subject: String, details: Vec<String> },
    #[error("Invalid schema: {0}")]
    InvalidSchema(String),
    /// 42201 with Confluent's own wording, which clients match ("Empty schema",
    /// "Version is not one more than previous version").
    #[error("{0}")]
    Unprocessable(String),
    /// A subject name Confluent refuses: reserved (`__GLOBAL`, `__EMPTY`) or with
    /// control characters.
    #[error("The specified subject is not valid: '{0}'")]
    InvalidSubject(String),
    #[error(
        "The specified version '{0}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""
    )]
    InvalidVersion(String),
    #[error(
        "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive; got '{0}'"
    )]
    InvalidCompatLevel(String),
    #[error("Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT; got '{0}'")]
    InvalidMode(String),
    #[error("{0}")]
    NotPermitted(String),
    #[error("{0}")]
    ReferenceExists(String),
    /// A rule set that cannot be used as given (a tag request with both `ruleSet`
    /// and `rulesToMerge` / `rulesToRemove`).
    #[error("{0}")]
    InvalidRuleSet(String),
    /// `DELETE /contexts/{ctx}` on a context that holds a subject (soft-deleted ones count).
    #[error("The specified context '{0}' is not empty.")]
    ContextNotEmpty(String),
    /// The request body is not the route's JSON shape.
    #[error("{0}")]
    BadRequest(String),
    /// The request body is not JSON at all, or JSON that cannot be the route's
    /// object (an array, a bare string or number): Confluent's 400.
    #[error("{0}")]
    MalformedBody(String),
    /// A request body in a content type the registry does not read.
    #[error("HTTP 415 Unsupported Media Type")]
    UnsupportedMediaType,
    /// No route matches (a path parameter of the wrong kind, e.g. `/schemas/ids/abc`).
    #[error("HTTP 404 Not Found")]
    NoRoute,
    /// The internal schemas topic failed (disk, shutdown).
    #[error("Error in the backend data store: {0}")]
    Store(String),
    /// A compatibility checker did not answer in time.
    #[error("Operation timed out: {0}")]
    Timeout(String),
    /// A compatibility checker failed (trap, bad output).
    #[error("Error in the compatibility checker: {0}")]
    Checker(String),
}

pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

impl RegistryError {
    /// Confluent's `error_code`.
    pub fn error_code(&self) -> u32 {
        match self {
            RegistryError::SubjectNotFound(_) => 40401,
            RegistryError::VersionNotFound { .. } => 40402,
            RegistryError::SchemaNotFound(_) => 40403,
            RegistryError::SubjectSoftDeleted(_) => 40404,
            RegistryError::SubjectNotSoftDeleted(_) => 40405,
            RegistryError::VersionSoftDeleted { .. } => 40406,
            RegistryError::VersionNotSoftDeleted { .. } => 40407,
            RegistryError::SubjectCompatNotConfigured(_) => 40408,
            RegistryError::SubjectModeNotConfigured(_) => 40409,
            RegistryError::Incompatible { .. } => 409,
            RegistryError::InvalidSchema(_) | RegistryError::Unprocessable(_) => 42201,
            RegistryError::InvalidSubject(_) => 42208,
            RegistryError::InvalidVersion(_) => 42202,
            RegistryError::InvalidCompatLevel(_) => 42203,
            RegistryError::InvalidMode(_) => 42204,
            RegistryError::NotPermitted(_) => 42205,
            RegistryError::ReferenceExists(_) => 42206,
            RegistryError::InvalidRuleSet(_) => 42210,
            RegistryError::ContextNotEmpty(_) => 42211,
            RegistryError::BadRequest(_) => 422,
            RegistryError::MalformedBody(_) => 400,
            RegistryError::UnsupportedMediaType => 415,
            RegistryError::NoRoute => 404,
            RegistryError::Store(_) | RegistryError::Checker(_) => 50001,
            RegistryError::Timeout(_) => 50002,
        }
    }

    /// The HTTP status: the code itself for three-digit codes, else its first three digits.
    pub fn http_status(&self) -> u16 {
        let code = self.error_code();
        if code < 1000 { code as u16 } else { (code / 100) as u16 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_codes() {
        assert_eq!(RegistryError::SubjectNotFound("s".into()).http_status(), 404);
        assert_eq!(RegistryError::Incompatible { subject: "s".into(), details: vec![] }.http_status(), 409);
        assert_eq!(RegistryError::InvalidSchema("x".into()).http_status(), 422);
        assert_eq!(RegistryError::BadRequest("x".into()).http_status(), 422);
        assert_eq!(RegistryError::Timeout("x".into()).http_status(), 500);
        let e = RegistryError::Incompatible { subject: "s".into(), details: vec!["a".into(), "b".into()] };
        assert!(e.to_string().ends_with("details: [a, b]"), "{e}");
    }
}
