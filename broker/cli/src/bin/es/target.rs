//! The object a subcommand acts on, given positionally (`es topic describe orders`)
//! or by its flag (`--topic`/`--name`, `--group`), as kubectl and rpk accept both.

use clap::Args;

/// A topic: `TOPIC`, `--topic TOPIC` or `--name TOPIC`.
#[derive(Debug, Clone, Args)]
pub struct TopicArg {
    /// The topic.
    #[arg(value_name = "TOPIC", required_unless_present = "topic_flag")]
    topic_pos: Option<String>,
    /// The topic (the same as the positional TOPIC).
    #[arg(
        long = "topic",
        visible_alias = "name",
        id = "topic_flag",
        value_name = "TOPIC",
        conflicts_with = "topic_pos"
    )]
    topic_flag: Option<String>,
}

impl TopicArg {
    pub fn name(&self) -> &str {
        self.topic_pos.as_deref().or(self.topic_flag.as_deref()).expect("clap requires TOPIC or --topic")
    }
}

/// A consumer group: `GROUP` or `--group GROUP`.
#[derive(Debug, Clone, Args)]
pub struct GroupArg {
    /// The consumer group.
    #[arg(value_name = "GROUP", required_unless_present = "group_flag")]
    group_pos: Option<String>,
    /// The consumer group (the same as the positional GROUP).
    #[arg(long = "group", id = "group_flag", value_name = "GROUP", conflicts_with = "group_pos")]
    group_flag: Option<String>,
}

impl GroupArg {
    pub fn name(&self) -> &str {
        self.group_pos.as_deref().or(self.group_flag.as_deref()).expect("clap requires GROUP or --group")
    }
}

/// A plugin: `NAME` or `--name NAME`.
#[derive(Debug, Clone, Args)]
pub struct PluginArg {
    /// The plugin.
    #[arg(value_name = "NAME", required_unless_present = "plugin_flag")]
    plugin_pos: Option<String>,
    /// The plugin (the same as the positional NAME).
    #[arg(long = "name", id = "plugin_flag", value_name = "NAME", conflicts_with = "plugin_pos")]
    plugin_flag: Option<String>,
}

impl PluginArg {
    pub fn name(&self) -> &str {
        self.plugin_pos.as_deref().or(self.plugin_flag.as_deref()).expect("clap requires NAME or --name")
    }
}
