use std::collections::HashMap;

use super::*;
use crate::{
    config::PrefixMode,
    policy::{Glob, ItemPattern, Items, Who},
    principal::Identity,
};

fn items(upstreams: Option<&[&str]>, tools: Option<&[&str]>) -> Items {
    Items {
        upstreams: upstreams.map(|u| u.iter().map(|g| Glob::new(g).unwrap()).collect()),
        tools: tools.map(|t| t.iter().map(|p| ItemPattern::new(p).unwrap()).collect()),
        ..Items::default()
    }
}

fn rule(group: Option<&str>, allow: Items, deny: Items) -> Rule {
    Rule {
        name: "test".into(),
        who: Who {
            groups: group.map(|g| vec![g.to_owned()]),
            ..Who::default()
        },
        gate: Gate { allow, deny },
        approval: None,
    }
}

fn member(group: &str) -> Principal {
    Principal::authenticated(
        &format!("key:{group}-user"),
        Identity {
            subject: format!("{group}-user"),
            groups: vec![group.to_owned()],
            ..Identity::default()
        },
    )
}

fn catalog_settings() -> CatalogSettings {
    CatalogSettings {
        prefix_mode: PrefixMode::Conditional,
        separator: "__".into(),
        page_size: 100,
        ..Default::default()
    }
}

fn access(rules: Vec<Rule>, endpoints: Vec<EndpointSettings>) -> Access {
    let upstreams = ["github", "db", "files"].map(|n| UpstreamName::new(n).unwrap());
    Access::new(rules, endpoints, &catalog_settings(), &upstreams)
}

#[test]
fn deny_wins_and_allow_lists_of_applying_rules_add_up() {
    let access = access(
        vec![
            // Everyone: nothing of db, and no deleting.
            rule(
                None,
                Items::default(),
                items(Some(&["db"]), Some(&["*:delete_*"])),
            ),
            // Everyone: only reading tools...
            rule(None, items(None, Some(&["*:get_*"])), Items::default()),
            // ...but writers may also create.
            rule(
                Some("writers"),
                items(None, Some(&["github:create_*"])),
                Items::default(),
            ),
        ],
        Vec::new(),
    );
    let main = EndpointName::MAIN;
    let anyone = access.view_key(&main, &Principal::anonymous()).unwrap();
    let writer = access.view_key(&main, &member("writers")).unwrap();
    assert_ne!(anyone, writer);
    assert!(access.sees(&anyone, Kind::Tool, "github", "get_issue"));
    assert!(!access.sees(&anyone, Kind::Tool, "github", "create_issue"));
    assert!(access.sees(&writer, Kind::Tool, "github", "create_issue"));
    assert!(!access.sees(&writer, Kind::Tool, "github", "delete_repo"));
    assert!(!access.sees(&writer, Kind::Tool, "db", "get_row"));
    assert!(!access.sees_upstream(&writer, "db"));
    // Prompts and resources are not restricted by tool lists.
    assert!(access.sees(&anyone, Kind::Prompt, "github", "anything"));
    assert!(!access.sees(&anyone, Kind::Prompt, "db", "anything"));
}

#[test]
fn an_empty_allow_list_allows_nothing_until_another_rule_allows() {
    let access = access(
        vec![
            rule(None, items(Some(&[]), None), Items::default()),
            rule(Some("ops"), items(Some(&["db"]), None), Items::default()),
        ],
        Vec::new(),
    );
    let main = EndpointName::MAIN;
    let anyone = access.view_key(&main, &Principal::anonymous()).unwrap();
    let ops = access.view_key(&main, &member("ops")).unwrap();
    assert!(!access.sees_upstream(&anyone, "github"));
    assert!(access.sees_upstream(&ops, "db"));
    assert!(!access.sees_upstream(&ops, "github"));
}

#[test]
fn an_endpoint_narrows_what_rules_allow_and_names_on_its_own() {
    let readonly = EndpointSettings {
        name: "readonly".into(),
        path: "/profiles/readonly/mcp".into(),
        prefix_mode: None,
        tool_search: None,
        inline_resources: None,
        gate: Gate {
            allow: items(Some(&["github"]), Some(&["*:get_*"])),
            deny: Items::default(),
        },
        tools: HashMap::from([(
            ("github".to_owned(), "get_issue".to_owned()),
            ToolShape {
                name: Some("issue".into()),
                description: None,
            },
        )]),
    };
    let access = access(
        vec![rule(
            Some("admins"),
            items(None, Some(&["*:*"])),
            Items::default(),
        )],
        vec![readonly],
    );
    let endpoint = EndpointName::named("readonly".into());
    let admin = access.view_key(&endpoint, &member("admins")).unwrap();
    assert!(!admin.is_whole());
    assert!(access.sees(&admin, Kind::Tool, "github", "get_issue"));
    assert!(!access.sees(&admin, Kind::Tool, "github", "create_issue"));
    assert!(!access.sees_upstream(&admin, "files"));
    // One upstream served: conditional prefixing leaves names as they are.
    assert!(!access.scheme(&admin).unwrap().is_prefixed());
    assert_eq!(
        access
            .tool_shape(&admin, "github", "get_issue")
            .and_then(|s| s.name.as_deref()),
        Some("issue")
    );
    assert!(
        access
            .view_key(&EndpointName::named("gone".into()), &member("admins"))
            .is_none()
    );
    let whole = access
        .view_key(&EndpointName::MAIN, &Principal::anonymous())
        .unwrap();
    assert!(whole.is_whole());
}
