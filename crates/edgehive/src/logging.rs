//! Structured logs: `tracing` to stderr, human or JSON.
//!
//! The filter is a list of `target=level` directives with an optional
//! default level (`info,edgehive_beehive=debug`), tracing-subscriber's
//! `Targets`: what `RUST_LOG` users write for levels by module, without the
//! span and field matchers of its `EnvFilter` (and the regex engine those
//! bring into the edge's binary).

use anyhow::Context as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Parses a log filter (`EDGEHIVE_LOG`, `--log`); an empty one is the
/// default, `info`. A target is a module path (`edgehive_beehive::bus`):
/// anything else (`[span]`, `{field}`: `EnvFilter`'s syntax) is refused
/// rather than taken for a target that matches nothing.
pub(crate) fn filter_of(filter: &str) -> anyhow::Result<Targets> {
    let filter = if filter.trim().is_empty() { "info" } else { filter };
    let context = || format!("parse log filter {filter:?}");
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let target = directive.split_once('=').map_or(directive, |(t, _)| t);
        if !target.chars().all(|c| c.is_ascii_alphanumeric() || "_:-.".contains(c)) {
            return Err(anyhow::anyhow!(
                "{target:?} is not a level or a target (a module path such as edgehive_beehive)"
            ))
            .with_context(context);
        }
    }
    filter.parse::<Targets>().with_context(context)
}

/// Installs the global subscriber.
pub(crate) fn init(filter: &str, json: bool) -> anyhow::Result<()> {
    let filter = filter_of(filter)?;
    let builder = tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).with_writer(std::io::stderr);
    let res = if json {
        builder.json().finish().with(filter).try_init()
    } else {
        builder.compact().finish().with(filter).try_init()
    };
    res.map_err(|e| anyhow::anyhow!("install log subscriber: {e}"))
}

#[cfg(test)]
mod tests {
    use super::filter_of;
    use tracing::Level;
    use tracing::level_filters::LevelFilter;

    #[test]
    fn filters_by_default_level_and_by_target() {
        let f = filter_of("info,edgehive_beehive=debug,h2=off").unwrap();
        assert!(f.would_enable("edgehive_edgehub", &Level::INFO));
        assert!(!f.would_enable("edgehive_edgehub", &Level::DEBUG));
        assert!(f.would_enable("edgehive_beehive::bus", &Level::DEBUG));
        assert!(!f.would_enable("h2::codec", &Level::ERROR));
        assert_eq!(filter_of("warn").unwrap().default_level(), Some(LevelFilter::WARN));
        // `EDGEHIVE_LOG=` (set, but empty) logs as by default, not nothing.
        assert_eq!(filter_of(" ").unwrap().default_level(), Some(LevelFilter::INFO));
    }

    #[test]
    fn a_bad_level_or_target_is_an_error_that_quotes_the_filter() {
        let e = filter_of("edgehive=loud").unwrap_err();
        assert!(format!("{e:#}").contains("\"edgehive=loud\""), "{e:#}");
        for bad in ["[[[", "info,edgehive[span]=debug", "{field=1}"] {
            let e = filter_of(bad).unwrap_err();
            assert!(format!("{e:#}").contains("is not a level or a target"), "{bad}: {e:#}");
        }
    }
}
