//! `es-broker doctor`: offline checks of the configuration, the machine and the
//! data directory before a start, each ok / warn / fail with what to do next.
//! Nothing here changes the data (the log's recovery scan runs read-only); the
//! only writes are a probe file in the data directory and a probe object in the
//! cold store, each removed at once. Exit code:
//! 0 all ok, 1 warnings, 2 failures.

#[path = "doctor/checks.rs"]
mod checks;
#[path = "doctor/disk.rs"]
mod disk;
#[path = "doctor/peers.rs"]
mod peers;

use std::process::ExitCode;

use crate::flags::CommandLine;

/// How a check came out; the worst one sets the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One finding: which check, how it came out, what was seen, and what to do.
#[derive(Debug, Clone)]
pub struct Finding {
    pub check: &'static str,
    pub status: Status,
    pub message: String,
    pub fix: Option<String>,
}

impl Finding {
    pub fn ok(check: &'static str, message: impl Into<String>) -> Finding {
        Finding { check, status: Status::Ok, message: message.into(), fix: None }
    }

    pub fn warn(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { check, status: Status::Warn, message: message.into(), fix: Some(fix.into()) }
    }

    pub fn fail(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { check, status: Status::Fail, message: message.into(), fix: Some(fix.into()) }
    }
}

pub fn run(line: &CommandLine, json: bool) -> ExitCode {
    let findings = findings(line);
    if json {
        println!("{}", as_json(&findings));
    } else {
        print!("{}", as_text(&findings));
    }
    match findings.iter().map(|f| f.status).max().unwrap_or(Status::Ok) {
        Status::Ok => ExitCode::SUCCESS,
        Status::Warn => ExitCode::from(1),
        Status::Fail => ExitCode::from(2),
    }
}

/// Every check; a configuration that does not resolve stops there, since the
/// rest needs to know where the data lives.
fn findings(line: &CommandLine) -> Vec<Finding> {
    let cfg = match crate::config_cmd::load(line) {
        Ok(cfg) => cfg,
        Err(errors) => {
            let fix = "fix the setting (`es-broker config reference` lists them), then run doctor again";
            return errors.iter().map(|e| Finding::fail("config", e.to_string(), fix)).collect();
        }
    };
    let mut out = checks::config(&cfg);
    out.extend(checks::listeners(&cfg));
    out.extend(checks::tls_expiry(&cfg));
    out.extend(disk::data_dir(&cfg));
    out.extend(checks::clock(&crate::data_dir(&cfg)));
    out.extend(crate::cold::doctor(&cfg));
    out.extend(peers::peers(&cfg));
    out
}

fn as_text(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        out.push_str(&format!("{:<5}{:<12}{}\n", f.status.label(), f.check, f.message));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("{:17}-> {fix}\n", ""));
        }
    }
    let count = |s: Status| findings.iter().filter(|f| f.status == s).count();
    out.push_str(&format!(
        "\n{} ok, {} warnings, {} failures\n",
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Fail)
    ));
    out
}

fn as_json(findings: &[Finding]) -> String {
    let worst = findings.iter().map(|f| f.status).max().unwrap_or(Status::Ok);
    let checks: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            serde_json::json!({
                "check": f.check,
                "status": f.status.label(),
                "message": f.message,
                "fix": f.fix,
            })
        })
        .collect();
    serde_json::json!({ "status": worst.label(), "checks": checks }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_finding_sets_the_status_and_json_carries_every_check() {
        let findings =
            [Finding::ok("a", "fine"), Finding::warn("b", "meh", "do x"), Finding::ok("c", "fine")];
        let json: serde_json::Value = serde_json::from_str(&as_json(&findings)).unwrap();
        assert_eq!(json["status"], "warn");
        assert_eq!(json["checks"].as_array().unwrap().len(), 3);
        assert_eq!(json["checks"][1]["fix"], "do x");
        let text = as_text(&findings);
        assert!(text.contains("warn b           meh\n") && text.contains("-> do x"), "{text}");
        assert!(text.ends_with("2 ok, 1 warnings, 0 failures\n"), "{text}");
    }
}
