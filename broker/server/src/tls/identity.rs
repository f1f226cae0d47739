//! mTLS as an identity: rules that map a verified client certificate's subject
//! CN or a SAN (DNS name or URI) to an API key, so the client holds that key's
//! grants with no login step. Names compare as exact bytes, like grants; the
//! first matching rule wins; a certificate no rule matches is anonymous.

use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use super::TlsError;

/// What part of a certificate a rule looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMatch {
    /// The subject's common name (`cn:NAME`).
    CommonName(String),
    /// A DNS subject alternative name (`san:dns:NAME`).
    SanDns(String),
    /// A URI subject alternative name (`san:uri:URI`), e.g. a SPIFFE id.
    SanUri(String),
}

/// One `--tls-principal-rule`: `cn:NAME=KEYID`, `san:dns:NAME=KEYID` or
/// `san:uri:URI=KEYID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalRule {
    pub matches: RuleMatch,
    pub key: es_auth::KeyId,
}

impl PrincipalRule {
    pub fn parse(text: &str) -> Result<PrincipalRule, TlsError> {
        let refuse = |message: &str| TlsError::Rule { rule: text.to_owned(), message: message.to_owned() };
        // A key id never holds '=', a URI may: split at the last one.
        let Some((pattern, key)) = text.rsplit_once('=') else {
            return Err(refuse("expected PATTERN=KEYID, e.g. san:dns:billing.internal=7a19fb2d099a9557"));
        };
        // The whole key text is accepted too, but only its id is kept.
        let id = key.strip_prefix("es_").map_or(key, |rest| rest.split('_').next().unwrap_or(""));
        let key = es_auth::KeyId::parse(id).map_err(|e| refuse(&format!("{key:?} is not a key id: {e}")))?;
        let matches = if let Some(name) = pattern.strip_prefix("cn:") {
            RuleMatch::CommonName(name.to_owned())
        } else if let Some(name) = pattern.strip_prefix("san:dns:") {
            RuleMatch::SanDns(name.to_owned())
        } else if let Some(uri) = pattern.strip_prefix("san:uri:") {
            RuleMatch::SanUri(uri.to_owned())
        } else {
            return Err(refuse("the pattern starts with cn:, san:dns: or san:uri:"));
        };
        let empty = match &matches {
            RuleMatch::CommonName(n) | RuleMatch::SanDns(n) | RuleMatch::SanUri(n) => n.is_empty(),
        };
        if empty {
            return Err(refuse("an empty name would match nothing or everything"));
        }
        Ok(PrincipalRule { matches, key })
    }
}

/// The names of a certificate that rules can match.
#[derive(Debug, Default, PartialEq, Eq)]
struct CertNames {
    common_names: Vec<String>,
    dns: Vec<String>,
    uris: Vec<String>,
}

fn names_of(der: &[u8]) -> Option<CertNames> {
    // The chain was verified already; a certificate this parser refuses is simply
    // anonymous.
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let mut names = CertNames::default();
    for cn in cert.subject().iter_common_name() {
        if let Ok(text) = cn.as_str() {
            names.common_names.push(text.to_owned());
        }
    }
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(n) => names.dns.push((*n).to_owned()),
                GeneralName::URI(u) => names.uris.push((*u).to_owned()),
                // Other kinds (IP, e-mail, directory names) have no rule form.
                _ => {}
            }
        }
    }
    Some(names)
}

/// The key the first matching rule names, if any.
pub fn principal_of(rules: &[PrincipalRule], cert_der: &[u8]) -> Option<es_auth::KeyId> {
    let names = names_of(cert_der)?;
    let has = |list: &[String], want: &str| list.iter().any(|n| n == want);
    rules
        .iter()
        .find(|rule| match &rule.matches {
            RuleMatch::CommonName(n) => has(&names.common_names, n),
            RuleMatch::SanDns(n) => has(&names.dns, n),
            RuleMatch::SanUri(u) => has(&names.uris, u),
        })
        .map(|rule| rule.key.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "00000000000000aa";
    const B: &str = "00000000000000bb";

    fn cert(cn: &str, sans: &[&str]) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        for san in sans {
            let name = match san.strip_prefix("uri:") {
                Some(uri) => rcgen::SanType::URI(uri.try_into().unwrap()),
                None => rcgen::SanType::DnsName((*san).try_into().unwrap()),
            };
            params.subject_alt_names.push(name);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn rules(texts: &[&str]) -> Vec<PrincipalRule> {
        texts.iter().map(|t| PrincipalRule::parse(t).unwrap()).collect()
    }

    #[test]
    fn rules_parse_every_form_and_refuse_the_rest() {
        let r = PrincipalRule::parse(&format!("san:uri:spiffe://es/a?x=1={A}")).unwrap();
        assert_eq!(r.matches, RuleMatch::SanUri("spiffe://es/a?x=1".into()));
        assert_eq!(r.key.to_string(), A);
        let whole = format!("es_{A}_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(PrincipalRule::parse(&format!("cn:billing={whole}")).unwrap().key.to_string(), A);
        for bad in ["cn:billing", "cn:billing=KEY", "dns:billing=00000000000000aa", "cn:=00000000000000aa"] {
            let e = PrincipalRule::parse(bad).unwrap_err();
            assert!(e.to_string().contains("--tls-principal-rule"), "{e}");
        }
    }

    #[test]
    fn the_first_matching_rule_names_the_key() {
        let c = cert("billing-client", &["billing.internal", "uri:spiffe://es/billing"]);
        let set = rules(&[&format!("cn:nobody={B}"), &format!("san:dns:billing.internal={A}")]);
        assert_eq!(principal_of(&set, &c).unwrap().to_string(), A);
        let set = rules(&[&format!("san:uri:spiffe://es/billing={B}"), &format!("cn:billing-client={A}")]);
        assert_eq!(principal_of(&set, &c).unwrap().to_string(), B);
        assert_eq!(principal_of(&rules(&[&format!("cn:billing-client={A}")]), &c).unwrap().to_string(), A);
    }

    #[test]
    fn names_compare_as_exact_bytes_and_unmatched_is_anonymous() {
        let c = cert("Billing", &["billing.internal"]);
        let set = rules(&[
            &format!("cn:billing={A}"),
            &format!("san:dns:billing.internal.={A}"),
            &format!("san:uri:billing.internal={A}"),
        ]);
        assert_eq!(principal_of(&set, &c), None);
        assert_eq!(principal_of(&set, b"not a certificate"), None);
    }
}
