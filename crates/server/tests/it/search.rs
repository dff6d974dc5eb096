//! Message search over REST: by words, phrases, author, mention, `has`,
//! id range, pins, order and pages; only in channels the caller may read;
//! edits and deletes followed; DMs through the channel route.

use reqwest::Method;
use serde_json::{json, Value};

use crate::attachments::upload;
use crate::common::*;

/// The ids of the hits, and the total.
async fn search(t: &TestServer, path: &str, auth: &str) -> (u64, Vec<String>) {
    let (s, v) = t.get(path, auth).await;
    assert_eq!(s, 200, "{path}: {v}");
    let ids = v["messages"].as_array().unwrap().iter().map(|hit| hit[0]["id"].as_str().unwrap().to_string()).collect();
    (v["total_results"].as_u64().unwrap(), ids)
}

fn id(m: &Value) -> String {
    m["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn search_finds_by_content_and_filters_in_readable_channels_only() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let g = &w.guild;
    let (alice, alice_id) = t.user("alice").await;
    t.join(&w.owner, &w.channel, &alice).await;
    // A channel alice cannot see.
    let (s, secret) = t.post(&format!("/guilds/{g}/channels"), &w.owner, json!({"name": "secret"})).await;
    assert_eq!(s, 201);
    let secret = id(&secret);
    let deny = json!({"type": 0, "allow": "0", "deny": "1024"});
    assert_eq!(t.req(Method::PUT, &format!("/channels/{secret}/permissions/{g}"), Some(&w.owner), Some(deny)).await.0, 204);

    let m1 = t.say(&w.owner, &w.channel, "The quick brown fox").await;
    let m2 = t.say(&alice, &w.channel, &format!("a brown bear for <@{}>", w.owner_id)).await;
    let hidden = t.say(&w.owner, &secret, "brown secret plans").await;
    let m3 = t.say(&w.owner, &w.channel, "see https://example.com for foxes").await;
    let (s, m4) =
        upload(&t, &format!("/channels/{}/messages", w.channel), Some(&alice), json!({"content": "a brown file"}), &[("f.txt", b"hi")])
            .await;
    assert_eq!(s, 200, "{m4}");
    let base = format!("/guilds/{g}/messages/search");

    assert_eq!(
        search(&t, &format!("{base}?content=brown"), &alice).await,
        (3, vec![id(&m4), id(&m2), id(&m1)]),
        "never the hidden channel"
    );
    assert_eq!(search(&t, &format!("{base}?content=brown"), &w.owner).await.0, 4, "the owner sees it");
    assert_eq!(search(&t, &format!("{base}?content=%22quick%20brown%22"), &alice).await.1, vec![id(&m1)], "a phrase");
    assert_eq!(search(&t, &format!("{base}?content=BROWN%20fox"), &alice).await.1, vec![id(&m1)], "every word, any case");
    assert_eq!(search(&t, &format!("{base}?author_id={alice_id}"), &w.owner).await.1, vec![id(&m4), id(&m2)]);
    assert_eq!(search(&t, &format!("{base}?mentions={}", w.owner_id), &alice).await.1, vec![id(&m2)]);
    assert_eq!(search(&t, &format!("{base}?has=link"), &alice).await.1, vec![id(&m3)]);
    assert_eq!(search(&t, &format!("{base}?has=file"), &alice).await.1, vec![id(&m4)]);
    assert_eq!(search(&t, &format!("{base}?min_id={}&max_id={}", id(&m1), id(&m3)), &w.owner).await.1, vec![id(&hidden), id(&m2)]);
    assert_eq!(search(&t, &format!("{base}?channel_id={secret}&content=brown"), &alice).await.0, 0, "asking for it does not help");
    assert_eq!(search(&t, &format!("{base}?channel_id={secret}&content=brown"), &w.owner).await.1, vec![id(&hidden)]);
    assert_eq!(search(&t, &format!("{base}?content=brown&sort_order=asc&limit=1&offset=1"), &alice).await, (3, vec![id(&m2)]));
    let (total, by_relevance) = search(&t, &format!("{base}?content=brown&sort_by=relevance"), &alice).await;
    assert_eq!((total, by_relevance.len()), (3, 3));
    assert_eq!(t.req(Method::PUT, &format!("/channels/{}/pins/{}", w.channel, id(&m1)), Some(&w.owner), None).await.0, 204);
    assert_eq!(search(&t, &format!("{base}?pinned=true"), &alice).await.1, vec![id(&m1)]);

    // Bad parameters: Discord's 50035, naming the field.
    for (q, field) in [("has=poll", "has"), ("limit=26", "limit"), ("sort_by=size", "sort_by"), ("author_id=me", "author_id")] {
        let (s, v) = t.get(&format!("{base}?{q}"), &alice).await;
        assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{q}: {v}");
        assert!(v["errors"][field].is_object(), "{q}: {v}");
    }

    // An edit changes what finds it; a delete removes it.
    let (s, _, _) = t
        .req(
            Method::PATCH,
            &format!("/channels/{}/messages/{}", w.channel, id(&m1)),
            Some(&w.owner),
            Some(json!({"content": "slow green turtle"})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(search(&t, &format!("{base}?content=turtle"), &alice).await.1, vec![id(&m1)]);
    assert_eq!(search(&t, &format!("{base}?content=brown"), &alice).await.1, vec![id(&m4), id(&m2)]);
    let (s, _, _) = t.req(Method::DELETE, &format!("/channels/{}/messages/{}", w.channel, id(&m2)), Some(&alice), None).await;
    assert_eq!(s, 204);
    assert_eq!(search(&t, &format!("{base}?content=brown"), &alice).await.1, vec![id(&m4)]);

    // A DM, through the channel route; nobody else may search it.
    let (s, dm) = t.post("/users/@me/channels", &alice, json!({"recipient_id": w.owner_id})).await;
    assert_eq!(s, 200, "{dm}");
    let dm = id(&dm);
    let said = t.say(&alice, &dm, "brown paper packages").await;
    assert_eq!(search(&t, &format!("/channels/{dm}/messages/search?content=brown"), &w.owner).await.1, vec![id(&said)]);
    let (stranger, _) = t.user("stranger").await;
    let (s, _) = t.get(&format!("/channels/{dm}/messages/search?content=brown"), &stranger).await;
    assert!(s == 403 || s == 404, "{s}");
    assert_eq!(search(&t, &format!("/channels/{}/messages/search?content=brown", w.channel), &alice).await.1, vec![id(&m4)]);
}

#[tokio::test]
async fn total_results_stops_at_search_count_max_but_announces_the_next_page() {
    let t = TestServer::start_with(|c| c.search.count_max = 1).await;
    let w = t.world().await;
    let mut ids = Vec::new();
    for k in 0..3 {
        ids.push(id(&t.say(&w.owner, &w.channel, &format!("brown {k}")).await));
    }
    let base = format!("/guilds/{}/messages/search?content=brown", w.guild);
    assert_eq!(search(&t, &format!("{base}&limit=1"), &w.owner).await, (2, vec![ids[2].clone()]), "one past the page");
    assert_eq!(search(&t, &format!("{base}&limit=1&offset=1"), &w.owner).await, (3, vec![ids[1].clone()]));
    assert_eq!(search(&t, &base, &w.owner).await.0, 3, "never more than there are");
}
