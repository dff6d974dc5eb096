//! Emojis as REST paths, request bodies and wire objects: reading the
//! emoji of a reaction path (Unicode, `name:id` or `a:name:id`), checking
//! a custom emoji's name and image (a data URI), and the emoji objects
//! (full for a guild's emojis, partial for reactions).

use std::path::{Path, PathBuf};

use base64::Engine;
use protocol::id::EmojiId;
use protocol::model;
use store::{EmojiRecord, ReactionEmoji, UserRecord};

use crate::convert;

/// Longest Unicode emoji taken from a path, in bytes: ZWJ sequences with
/// skin tones (a kissing couple: 35 bytes) are the longest there are.
const MAX_UNICODE_EMOJI_BYTES: usize = 64;

/// Largest emoji image, as on Discord (256 KiB): a larger one is answered
/// 50138, as Discord does when it cannot shrink an upload below it.
pub const MAX_IMAGE_BYTES: usize = 256 * 1024;

/// Emoji names: 2 to 32 characters, letters, digits and underscores.
const NAME_CHARS: std::ops::RangeInclusive<usize> = 2..=32;

/// The emoji of a reaction path, already percent-decoded: `name:id` or
/// `a:name:id` (optionally in `<...>`) for a custom emoji, else a Unicode
/// emoji. `None`: neither (Discord answers 10014).
pub fn from_path(s: &str) -> Option<ReactionEmoji> {
    let inner = s.strip_prefix('<').and_then(|r| r.strip_suffix('>')).unwrap_or(s);
    let parts: Vec<&str> = inner.split(':').collect();
    let (animated, name, id) = match parts.as_slice() {
        // `<:name:id>` leaves an empty first part.
        [name, id] | ["", name, id] => (false, *name, *id),
        ["a", name, id] => (true, *name, *id),
        [_] => return plausible_unicode(s).then(|| ReactionEmoji::Unicode(s.to_string())),
        _ => return None,
    };
    let id = id.parse::<u64>().ok().filter(|&n| n > 0)?;
    Some(ReactionEmoji::Custom { id: EmojiId(id), name: name.to_string(), animated })
}

/// Whether `s` plausibly is one Unicode emoji (a sequence of them): no
/// ASCII but the bases of keycaps (`1️⃣`, `#️⃣`), no letters of a script,
/// no spaces or control characters, short. Unicode's full list of emoji
/// sequences is not consulted: an odd sequence that passes is stored as
/// the client sent it.
pub fn plausible_unicode(s: &str) -> bool {
    if s.is_empty() || s.len() > MAX_UNICODE_EMOJI_BYTES || s.is_ascii() {
        return false;
    }
    let keycap = s.contains('\u{20e3}');
    s.chars().all(|c| match c {
        '0'..='9' | '#' | '*' => keycap,
        c if c.is_ascii() || c.is_whitespace() || c.is_control() => false,
        c => !c.is_alphanumeric() || symbol_block(c),
    })
}

/// Blocks where emoji live among characters Unicode also calls letters
/// (circled Ⓜ, enclosed ideographs such as 🈯).
fn symbol_block(c: char) -> bool {
    matches!(c as u32, 0x2100..=0x2BFF | 0x3000..=0x33FF | 0x1F000..=0x1FAFF)
}

/// A name for a custom emoji: `Err` is the 50035 field error.
pub fn check_name(name: &str) -> Result<(), (&'static str, &'static str)> {
    if !NAME_CHARS.contains(&name.chars().count()) {
        return Err(("BASE_TYPE_BAD_LENGTH", "Must be between 2 and 32 in length."));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(("STRING_TYPE_REGEX", "String value did not match validation regex."));
    }
    Ok(())
}

/// The image formats Discord takes for emojis (AVIF aside).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageKind {
    /// The format of an image, from its first bytes.
    pub fn sniff(b: &[u8]) -> Option<ImageKind> {
        if b.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageKind::Png)
        } else if b.starts_with(b"\xff\xd8\xff") {
            Some(ImageKind::Jpeg)
        } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
            Some(ImageKind::Gif)
        } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
            Some(ImageKind::Webp)
        } else {
            None
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::Gif => "image/gif",
            ImageKind::Webp => "image/webp",
        }
    }
}

/// Whether an image of this kind moves: a GIF, or a WebP with the
/// animation flag of its extended header (VP8X).
pub fn animated(kind: ImageKind, b: &[u8]) -> bool {
    match kind {
        ImageKind::Gif => true,
        ImageKind::Webp => b.len() > 20 && &b[12..16] == b"VP8X" && b[20] & 0x02 != 0,
        _ => false,
    }
}

/// Why an emoji image was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ImageError {
    /// Not a `data:image/...;base64,` URI of a PNG, JPEG, GIF or WebP.
    Invalid,
    /// Over [`MAX_IMAGE_BYTES`].
    TooLarge,
}

/// The bytes and format of an image sent as a data URI (`image` of
/// Discord's image data). The format is read from the bytes; the URI's
/// media type only has to say it is an image.
pub fn decode_data_uri(uri: &str) -> Result<(Vec<u8>, ImageKind), ImageError> {
    decode_image_uri(uri, MAX_IMAGE_BYTES)
}

/// [`decode_data_uri`] with another bound on the image's size (avatars).
pub fn decode_image_uri(uri: &str, max: usize) -> Result<(Vec<u8>, ImageKind), ImageError> {
    let rest = uri.strip_prefix("data:").ok_or(ImageError::Invalid)?;
    let (head, data) = rest.split_once(',').ok_or(ImageError::Invalid)?;
    if !head.starts_with("image/") || !head.ends_with(";base64") {
        return Err(ImageError::Invalid);
    }
    // Refused before decoding: base64 holds 3 bytes in every 4 characters.
    if data.len() / 4 * 3 > max + 3 {
        return Err(ImageError::TooLarge);
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim_end()).map_err(|_| ImageError::Invalid)?;
    if bytes.len() > max {
        return Err(ImageError::TooLarge);
    }
    let kind = ImageKind::sniff(&bytes).ok_or(ImageError::Invalid)?;
    Ok((bytes, kind))
}

/// Where the image of emoji `id` is kept.
pub fn image_path(data_dir: &Path, id: EmojiId) -> PathBuf {
    data_dir.join("emojis").join(id.0.to_string())
}

/// The emoji of a reaction as reactions and their events carry it.
pub fn partial(e: &ReactionEmoji) -> model::Emoji {
    let (id, animated) = match e {
        ReactionEmoji::Unicode(_) => (None, None),
        ReactionEmoji::Custom { id, animated, .. } => (Some(*id), Some(*animated)),
    };
    model::Emoji {
        id,
        name: Some(e.name().to_string()),
        roles: None,
        user: None,
        require_colons: None,
        managed: None,
        animated,
        available: None,
    }
}

/// A guild's custom emoji; `creator` for those who may manage emojis.
pub fn full(e: &EmojiRecord, creator: Option<&UserRecord>) -> model::Emoji {
    model::Emoji {
        id: Some(e.id),
        name: Some(e.name.clone()),
        roles: Some(e.roles.clone()),
        user: creator.map(convert::user),
        require_colons: Some(true),
        managed: Some(false),
        animated: Some(e.animated),
        available: Some(true),
    }
}

/// The emoji a custom emoji reaction is made with, as the guild has it now.
pub fn of_record(e: &EmojiRecord) -> ReactionEmoji {
    ReactionEmoji::Custom { id: e.id, name: e.name.clone(), animated: e.animated }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaction_paths_read_as_discord_names_them() {
        let custom = |id, name: &str, animated| Some(ReactionEmoji::Custom { id: EmojiId(id), name: name.into(), animated });
        assert_eq!(from_path("blob:123"), custom(123, "blob", false));
        assert_eq!(from_path("a:dance:456"), custom(456, "dance", true));
        assert_eq!(from_path("<:blob:123>"), custom(123, "blob", false));
        assert_eq!(from_path("<a:dance:456>"), custom(456, "dance", true));
        assert_eq!(from_path("blob:x"), None);
        assert_eq!(from_path("a:b:c:1"), None);
        for ok in ["👍", "👍🏽", "❤", "❤️", "1️⃣", "#️⃣", "🇫🇷", "👨‍👩‍👧‍👦", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "Ⓜ️", "🈯", "©️"]
        {
            assert_eq!(from_path(ok), Some(ReactionEmoji::Unicode(ok.into())), "{ok}");
        }
        for bad in ["", "x", "thumbsup", "1", "12", "é", "日本", "👍 ", "a👍", "\u{0}", &"👍".repeat(20)] {
            assert_eq!(from_path(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names_and_images_are_checked_like_discord() {
        assert!(check_name("ok_2").is_ok());
        assert!(check_name("x").is_err() && check_name(&"x".repeat(33)).is_err() && check_name("no-dash").is_err());
        let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[0; 16]].concat();
        let uri = |mime: &str, b: &[u8]| format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(b));
        assert_eq!(decode_data_uri(&uri("image/png", &png)), Ok((png.clone(), ImageKind::Png)));
        assert_eq!(decode_data_uri(&uri("image/gif", b"GIF89a....")).map(|(_, k)| k), Ok(ImageKind::Gif));
        assert_eq!(decode_data_uri(&uri("image/png", b"not an image")), Err(ImageError::Invalid));
        assert_eq!(decode_data_uri(&uri("text/plain", &png)), Err(ImageError::Invalid));
        assert_eq!(decode_data_uri("data:image/png;base64,%%%"), Err(ImageError::Invalid));
        assert_eq!(decode_data_uri("http://example/x.png"), Err(ImageError::Invalid));
        let big = [png.as_slice(), &vec![0; MAX_IMAGE_BYTES]].concat();
        assert_eq!(decode_data_uri(&uri("image/png", &big)), Err(ImageError::TooLarge));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\0\0\0\0\x02\0\0\0".to_vec();
        assert!(animated(ImageKind::Webp, &webp));
        webp[20] = 0;
        assert!(!animated(ImageKind::Webp, &webp) && animated(ImageKind::Gif, b"GIF89a"));
    }
}
