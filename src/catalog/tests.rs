//! Catalog merge: naming, order, pass-through of fields, collisions and URI routing.

use std::{collections::HashSet, sync::Arc};

use proptest::prelude::*;
use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool, ToolAnnotations};
use serde_json::json;

use super::*;

fn up(name: &str) -> UpstreamName {
    UpstreamName::new(name).unwrap()
}

fn tool(name: &str) -> Tool {
    let schema = json!({"type": "object", "properties": {"x": {"type": "string"}}});
    let serde_json::Value::Object(schema) = schema else {
        unreachable!()
    };
    Tool::new(name.to_owned(), format!("{name} does things"), schema)
}

fn part(tools: &[&str], uris: &[&str], templates: &[&str]) -> Arc<UpstreamCatalog> {
    Arc::new(UpstreamCatalog {
        tools: tools.iter().map(|t| tool(t).into()).collect(),
        prompts: tools
            .iter()
            .map(|t| Prompt::new(format!("{t}_prompt"), Some("p"), None).into())
            .collect(),
        resources: uris.iter().map(|u| Resource::new(*u, "r").into()).collect(),
        templates: templates
            .iter()
            .map(|t| ResourceTemplate::new(*t, "t").into())
            .collect(),
        rejected: Vec::new(),
        checks: Default::default(),
        instructions: None,
        task_extension: false,
        ui_extension: None,
        hints: Default::default(),
        needs: Default::default(),
    })
}

fn names(catalog: &Catalog) -> Vec<&str> {
    catalog.tools().iter().map(|t| &*t.name).collect()
}

#[test]
fn prefixed_merge_keeps_config_order_and_both_colliding_tools() {
    let parts = [
        (
            up("zeta"),
            part(&["echo", "add"], &["file:///a"], &["test://t/{id}"]),
        ),
        (up("alpha"), part(&["echo"], &["file:///a"], &[])),
    ];
    let catalog = Catalog::build(NameScheme::prefixed("__"), &parts);
    assert_eq!(names(&catalog), ["zeta__echo", "zeta__add", "alpha__echo"]);
    let route = catalog.tool("alpha__echo").unwrap();
    assert_eq!(
        (route.upstream.as_str(), &*route.original),
        ("alpha", "echo")
    );
    assert!(catalog.tool("echo").is_none());
    assert_eq!(
        catalog
            .prompt("zeta__add_prompt")
            .unwrap()
            .original
            .as_ref(),
        "add_prompt"
    );

    let uris: Vec<_> = catalog.resources().iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["zeta+file:///a", "alpha+file:///a"]);
    assert_eq!(catalog.templates()[0].uri_template, "zeta+test://t/{id}");
    assert_eq!(
        catalog.resolve_uri("zeta+test://t/7"),
        Some(UriRoute {
            upstream: "zeta",
            original: "test://t/7"
        })
    );
    assert_eq!(catalog.resolve_uri("file:///a"), None);
}

#[test]
fn fields_pass_through_unchanged() {
    let mut original = tool("search");
    original.title = Some("Search".into());
    original.annotations = Some(ToolAnnotations::new().read_only(true));
    let meta: rmcp::model::JsonObject =
        serde_json::from_value(json!({"vendor/x": [1, 2]})).unwrap();
    original.meta = Some(rmcp::model::MetaObject(meta));
    let parts = [(
        up("web"),
        Arc::new(UpstreamCatalog {
            tools: vec![original.clone().into()],
            ..UpstreamCatalog::default()
        }),
    )];
    let catalog = Catalog::build(NameScheme::prefixed("__"), &parts);
    let exposed = catalog.tool_definition("web__search").unwrap();
    let mut expected = serde_json::to_value(&original).unwrap();
    expected["name"] = json!("web__search");
    assert_eq!(serde_json::to_value(exposed).unwrap(), expected);
    assert!(Arc::ptr_eq(
        &catalog.tool_schema("web__search").unwrap(),
        &original.input_schema
    ));
}

#[test]
fn unprefixed_first_upstream_wins_and_uris_route_by_listing_or_template() {
    let parts = [
        (
            up("a"),
            part(&["echo"], &["mem://one"], &["test://template/{id}/data"]),
        ),
        (
            up("b"),
            part(&["echo", "other"], &["mem://one", "mem://two"], &[]),
        ),
    ];
    let catalog = Catalog::build(NameScheme::unprefixed(), &parts);
    assert_eq!(names(&catalog), ["echo", "other"]);
    assert_eq!(catalog.tool("echo").unwrap().upstream.as_str(), "a");
    assert_eq!(catalog.tool("other").unwrap().upstream.as_str(), "b");
    assert_eq!(
        catalog.resources().len(),
        2,
        "the shadowed mem://one is left out"
    );
    assert_eq!(catalog.resolve_uri("mem://two").unwrap().upstream, "b");
    assert_eq!(
        catalog
            .resolve_uri("test://template/9/data")
            .unwrap()
            .upstream,
        "a"
    );
    assert_eq!(
        catalog.resolve_uri("mem://unlisted"),
        None,
        "two owners possible"
    );

    let single = Catalog::build(NameScheme::unprefixed(), &parts[..1]);
    let route = single.resolve_uri("mem://unlisted").unwrap();
    assert_eq!((route.upstream, route.original), ("a", "mem://unlisted"));
}

#[test]
fn instructions_are_merged_under_upstream_names() {
    let with = UpstreamCatalog {
        instructions: Some("Use search first.".into()),
        ..UpstreamCatalog::default()
    };
    let parts = [
        (up("web"), Arc::new(with)),
        (up("quiet"), Arc::new(UpstreamCatalog::default())),
    ];
    let catalog = Catalog::build(NameScheme::prefixed("__"), &parts);
    assert_eq!(catalog.instructions(), Some("## web\nUse search first."));
    assert_eq!(
        Catalog::empty(NameScheme::unprefixed()).instructions(),
        None
    );
}

proptest! {
    /// Every exposed tool name is unique and routes back to an upstream that listed that tool.
    #[test]
    fn merge_without_duplicates(
        lists in proptest::collection::vec(proptest::collection::vec("[a-c]{1,2}", 0..6), 1..4),
        prefixed in any::<bool>(),
    ) {
        let parts: Vec<_> = lists
            .iter()
            .enumerate()
            .map(|(i, tools)| {
                let tools: Vec<&str> = tools.iter().map(String::as_str).collect();
                (up(&format!("u{i}")), part(&tools, &[], &[]))
            })
            .collect();
        let scheme = if prefixed { NameScheme::prefixed("__") } else { NameScheme::unprefixed() };
        let catalog = Catalog::build(scheme, &parts);
        let mut seen = HashSet::new();
        for tool in catalog.tools() {
            prop_assert!(seen.insert(tool.name.to_string()), "duplicate {}", tool.name);
            let route = catalog.tool(&tool.name).unwrap();
            let (_, listed) = parts.iter().find(|(n, _)| *n == route.upstream).unwrap();
            prop_assert!(listed.tools.iter().any(|t| *t.name == *route.original));
        }
        let distinct: HashSet<(usize, &String)> = lists
            .iter()
            .enumerate()
            .flat_map(|(i, tools)| tools.iter().map(move |t| (i, t)))
            .collect();
        let expected = if prefixed {
            distinct.len()
        } else {
            distinct.iter().map(|(_, t)| *t).collect::<HashSet<_>>().len()
        };
        prop_assert_eq!(catalog.tools().len(), expected);
    }
}

#[test]
fn versions_count_changes_per_list() {
    let scheme = NameScheme::prefixed("__");
    let a = (up("a"), part(&["echo"], &["x://1"], &[]));
    let first = Catalog::build(scheme.clone(), std::slice::from_ref(&a));
    let none = ListChanges::default();
    let same = Catalog::build(scheme.clone(), std::slice::from_ref(&a)).succeeding(&first, none);
    assert_eq!(same.versions(), first.versions(), "nothing changed");
    assert_eq!(same.generation(), 1);
    let more_tools = (up("a"), part(&["echo", "add"], &["x://1"], &[]));
    let changed =
        Catalog::build(scheme.clone(), std::slice::from_ref(&more_tools)).succeeding(&same, none);
    let versions = changed.versions();
    assert_eq!(
        (versions.tools, versions.prompts, versions.resources),
        (1, 1, 0)
    );
    assert_eq!(changed.generation(), 2);
    let announced = ListChanges {
        resources: true,
        ..ListChanges::default()
    };
    let told = Catalog::build(scheme, &[more_tools]).succeeding(&changed, announced);
    assert_eq!(
        told.versions().resources,
        1,
        "announced, though it looks the same"
    );
    assert_eq!(told.versions().tools, 1);
}

#[test]
fn views_show_what_their_viewer_may_see_under_their_endpoints_names() {
    use crate::policy::{
        EndpointName, EndpointSettings, Gate, Glob, ItemPattern, Items, Rule, ToolShape, Who,
    };
    let parts = [
        (
            up("github"),
            part(&["get_issue", "delete_repo"], &["gh://a"], &[]),
        ),
        (
            up("files"),
            part(&["read"], &["file:///public/a", "file:///secret"], &[]),
        ),
    ];
    let deny_deletes = Rule {
        name: "no deleting".into(),
        who: Who::default(),
        gate: Gate {
            deny: Items {
                tools: Some(vec![ItemPattern::new("*:delete_*").unwrap()]),
                resources: Some(vec![ItemPattern::new("files:file:///secret").unwrap()]),
                ..Items::default()
            },
            ..Gate::default()
        },
        approval: None,
    };
    let github_only = EndpointSettings {
        name: "gh".into(),
        path: "/servers/github/mcp".into(),
        prefix_mode: None,
        tool_search: None,
        inline_resources: None,
        gate: Gate {
            allow: Items {
                upstreams: Some(vec![Glob::new("github").unwrap()]),
                ..Items::default()
            },
            ..Gate::default()
        },
        tools: [(
            ("github".to_owned(), "get_issue".to_owned()),
            ToolShape {
                name: Some("issue".into()),
                description: Some("Reads one issue".into()),
            },
        )]
        .into(),
    };
    let settings = crate::config::CatalogSettings {
        prefix_mode: crate::config::PrefixMode::Conditional,
        separator: "__".into(),
        page_size: 100,
        ..Default::default()
    };
    let names_of = [up("github"), up("files")];
    let access = Arc::new(Access::new(
        vec![deny_deletes],
        vec![github_only],
        &settings,
        &names_of,
    ));
    let whole = Arc::new(
        Catalog::build(NameScheme::prefixed("__"), &parts)
            .paged(100)
            .seen_through(access),
    );
    let anyone = crate::principal::Principal::anonymous();
    let main = whole.view_for(&EndpointName::MAIN, &anyone, Features::ALL);
    assert_eq!(names(&main), ["github__get_issue", "files__read"]);
    assert!(main.tool("github__delete_repo").is_none());
    assert!(main.resolve_uri("files+file:///public/a").is_some());
    assert!(main.resolve_uri("files+file:///secret").is_none());
    assert_eq!(main.resources().len(), 2);
    // Built once per snapshot.
    assert!(Arc::ptr_eq(
        &main,
        &whole.view_for(&EndpointName::MAIN, &anyone, Features::ALL)
    ));

    let github = whole.view_for(&EndpointName::named("gh".into()), &anyone, Features::ALL);
    assert_eq!(names(&github), ["issue"]);
    assert_eq!(
        github
            .tool_definition("issue")
            .unwrap()
            .description
            .as_deref(),
        Some("Reads one issue")
    );
    assert_eq!(&*github.tool("issue").unwrap().original, "get_issue");
    assert_eq!(github.upstreams(), [up("github")]);
    assert!(!github.shows_upstream("files"));
    assert!(github.resolve_uri("gh://a").is_some());
    // Unprefixed with one upstream, any URI is that upstream's.
    assert_eq!(
        github.resolve_uri("file:///public/a").unwrap().upstream,
        "github"
    );
    assert_eq!(github.generation(), whole.generation());

    let gone = whole.view_for(&EndpointName::named("gone".into()), &anyone, Features::ALL);
    assert!(gone.tools().is_empty() && gone.resolve_uri("gh://a").is_none());
}

#[test]
fn upstreams_that_run_tasks_are_known_per_era() {
    let mut legacy = (*part(&["plain"], &[], &[])).clone();
    legacy.tools.push(
        ListedTool::from_value(json!({
            "name": "research", "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "optional"}
        }))
        .unwrap(),
    );
    let mut modern = (*part(&["slow"], &[], &[])).clone();
    modern.task_extension = true;
    let mut silent = (*part(&[], &[], &[])).clone();
    silent.task_extension = true;
    let parts = vec![
        (up("old"), Arc::new(legacy)),
        (up("new"), Arc::new(modern)),
        (up("empty"), Arc::new(silent)),
        (up("none"), part(&["a"], &[], &[])),
    ];
    let catalog = Catalog::build(NameScheme::prefixed("__"), &parts);
    let names = |era| -> Vec<&str> {
        catalog
            .task_upstreams(era)
            .iter()
            .map(|u| u.as_str())
            .collect()
    };
    assert_eq!(names(Era::Legacy), ["old"]);
    assert_eq!(
        names(Era::Modern),
        ["old", "new"],
        "a 2025-11-25 task tool's tasks are translated; an upstream without tools runs none"
    );
    assert!(catalog.runs_tasks_of(&up("new")));
    assert!(!catalog.runs_tasks_of(&up("none")));
    let route = catalog.tool_route("old__research").unwrap();
    assert_eq!(route.task_support, TaskSupport::Optional);
}

#[test]
fn a_tool_that_needs_a_client_feature_is_shown_only_to_clients_that_declare_it() {
    let mut part = UpstreamCatalog {
        tools: ["echo", "ask", "ask_url"]
            .into_iter()
            .map(|name| tool(name).into())
            .collect(),
        ..UpstreamCatalog::default()
    };
    part.needs.insert("ask".into(), Features::ELICITATION);
    let url = Features::ELICITATION.with(Features::URL_ELICITATION);
    part.needs.insert("ask_url".into(), url);
    let whole = Arc::new(Catalog::build(
        NameScheme::prefixed("__"),
        &[(up("everything"), Arc::new(part))],
    ));
    assert!(whole.depends_on_client());
    let anyone = crate::principal::Principal::anonymous();
    let main = crate::policy::EndpointName::MAIN;
    let view = |declared| whole.view_for(&main, &anyone, declared);

    assert!(
        Arc::ptr_eq(&view(Features::ALL), &whole),
        "all declared: the whole"
    );
    let bare = view(Features::NONE);
    assert_eq!(names(&bare), ["everything__echo"]);
    assert!(bare.tool("everything__ask").is_none(), "unknown to it");
    assert_eq!(
        names(&view(Features::ELICITATION.with(Features::SAMPLING))),
        ["everything__echo", "everything__ask"]
    );
    assert_eq!(names(&view(url)).len(), 3);
    // Built once per set of features left out (what else a client lacks changes nothing).
    assert!(Arc::ptr_eq(&bare, &view(Features::SAMPLING)));
}
