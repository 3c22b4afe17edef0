"""Paths as text: the one place that tells a local path from a URL, and what every path that is
printed or stored passes through (:func:`redact`).

Nothing here touches a file. :func:`is_url` decides local or remote for the whole storage room
(:mod:`.fs` picks :class:`~.local.LocalFiles` or :class:`~.remote.RemoteFiles` by it); above
the room a caller asks a question of capability instead (:func:`os_path`: "can I use os calls and
memory maps on it?").
"""

from __future__ import annotations

import glob as _glob
import os
import re
from typing import Iterable, List, Optional, Sequence, Tuple
from urllib.parse import unquote

# a scheme of two letters or more ("C://x" stays a Windows path), or fsspec's chained
# protocols ("simplecache::s3://...")
_SCHEME = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.\-]*::)*[A-Za-z][A-Za-z0-9+.\-]+)://")


def is_url(path: str) -> bool:
    """Whether ``path`` names something outside the local file system (``scheme://...``);
    ``file://`` URLs are local."""
    path = str(path)
    if "://" not in path:  # a plain local path (every file of a folder of 100,000): no pattern to match
        return False
    m = _SCHEME.match(path)
    return m is not None and m.group(1).lower() not in ("file", "local")


def empty_segment(path: str) -> bool:
    """Whether the URL ``path`` has an empty segment in its path (``s3://b//out``,
    ``s3://b/a//out``; a trailing ``/`` is none): a store lists nothing under such a prefix (s3fs),
    so a result published there is never moved in, nor a foreign object seen."""
    return is_url(path) and "//" in str(path).split("://", 1)[1].rstrip("/")


def no_url_among(texts) -> bool:
    """Whether none of ``texts`` can be a URL: none holds ``://``, :func:`is_url`'s first test,
    told once for all of them (100,000 paths: one join and one search, not a call a path)."""
    return "://" not in "\0".join(texts)


def local_path(path: str) -> str:
    """A local path without its ``file://`` prefix (the path itself when it has none)."""
    p = str(path)
    if "://" not in p:  # neither prefix: no lower-case copy made to tell
        return p
    for prefix in ("file://", "local://"):
        if p.lower().startswith(prefix):
            return p[len(prefix):]
    return p


def os_path(path) -> Optional[str]:
    """The path to give ``os`` calls and memory maps for ``path`` (``file://`` taken off), or
    None when ``path`` names a file in a store (reachable only through :mod:`.fs`)."""
    path = os.fspath(path)
    return None if is_url(path) else local_path(path)


def protocol(path: str) -> str:
    """``s3``, ``gs``, ... for a URL, ``file`` for a local path."""
    return str(path).partition("://")[0].lower() if is_url(path) else "file"


def same_location(a, b) -> bool:
    """Whether two paths name the same file: two local paths by their real paths (links
    followed; the file need not exist), two URLs by name; a local path and a URL never."""
    a, b = os.fspath(a), os.fspath(b)
    if is_url(a) or is_url(b):
        return is_url(a) and is_url(b) and a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(a) == os.path.realpath(b)


def inside(path, folder) -> bool:
    """Whether ``path`` is ``folder`` or lies under it: local paths by real path, URLs by name,
    a local path and a URL never."""
    p, f = os.fspath(path), os.fspath(folder)
    if is_url(p) or is_url(f):
        if not (is_url(p) and is_url(f)):
            return False
        p, f = p.rstrip("/"), f.rstrip("/")
        return p == f or p.startswith(f + "/")
    p, f = os.path.realpath(local_path(p)), os.path.realpath(local_path(f))
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def prefix_form(path: str, real_folders: Optional[dict] = None) -> str:
    """A folder's form for a test of one lying inside another, ending in its separator: a URL as
    typed, a local path resolved (its folder's real path; a symbolic link or ``.``/``..``
    followed). ``real_folders`` caches real paths of folders (a run may name 100,000 files)."""
    if is_url(path):
        return str(path).rstrip("/") + "/"
    local = local_path(path)
    if os.path.islink(local):
        return os.path.realpath(local).rstrip(os.sep) + os.sep
    head, tail = os.path.split(local)
    if tail in ("", ".", ".."):
        return os.path.realpath(local).rstrip(os.sep) + os.sep
    cache = real_folders if real_folders is not None else {}
    real = cache.get(head)
    if real is None:
        real = cache[head] = os.path.realpath(head or ".")
    return os.path.join(real, tail).rstrip(os.sep) + os.sep


def prefix_form_groups(paths: Sequence[str], real_folders: Optional[dict] = None, no_links: bool = False
                       ) -> Tuple[dict, List[Tuple[int, str]]]:
    """:func:`prefix_form` of each of ``paths``, by folder: ``({FOLDER: (i, {NAME: i})}, [(i, FORM)])``,
    the form of ``paths[i]`` being ``FOLDER + NAME + os.sep`` (FOLDER a real folder ending in
    its separator, NAME without one; ``i`` the first path of that folder, of that name), or
    FORM for the others (a URL, a symbolic link, a file of a folder holding few of the paths),
    in the order of the paths. Whether one of 100,000 files lies in a folder is then a question
    a folder, not a file; and the paths are taken apart in one pass, the rest done a folder at
    a time: a folder holding many of them is listed once for its symbolic links (rather than
    one ``lstat`` a file) and resolved once; not listed at all with ``no_links`` (the caller knows
    that none of the paths is a symbolic link: discover's walk saw each)."""
    cache = real_folders if real_folders is not None else {}
    urls = not no_url_among(paths)  # a URL or a file:// path among them: each one asked
    by_head: dict = {}  # a folder as named -> {NAME: its first path}
    others: List[Tuple[int, str]] = []
    for i, p in enumerate(paths):
        if urls:
            if is_url(p):
                others.append((i, prefix_form(p, cache)))
                continue
            p = local_path(p)
        head, _, tail = p.rpartition("/")
        if not head or head[-1] == "/" or os.sep != "/":  # "/NAME", "HEAD//NAME", Windows: as os.path.split
            head, tail = os.path.split(p)
        names = by_head.get(head)
        if names is None:
            names = by_head[head] = {}
        names.setdefault(tail, i)
    groups: dict = {}
    for head, names in by_head.items():
        for tail in _asked_alone(head, names, no_links):
            i = names.pop(tail)
            others.append((i, prefix_form(paths[i], cache)))
        if not names:
            continue
        real = cache.get(head)
        if real is None:
            real = cache[head] = os.path.realpath(head or ".")
        folder = os.path.join(real, "")  # os.path.join(real, tail) is folder + tail
        group = groups.get(folder)
        if group is None:
            groups[folder] = (next(iter(names.values())), names)
            continue
        seen = group[1]  # the folder named another way before (a link to it): each name's first path
        for tail, i in names.items():
            if seen.setdefault(tail, i) > i:
                seen[tail] = i
    others.sort()
    return groups, others


def _asked_alone(head: str, names: dict, no_links: bool = False) -> set:
    """The names of ``names`` (the paths of the folder ``head``) whose form :func:`prefix_form`
    gives one by one: ``.`` and ``..`` (or none), the symbolic links (none with ``no_links``: the
    folder is not listed), and every one of a folder holding few of the paths or that cannot be
    listed."""
    alone = names.keys() & ("", ".", "..")
    if len(names) < _LISTED:
        return set(names)
    if no_links:
        return alone
    try:
        with os.scandir(head or ".") as it:
            return alone | (names.keys() & {e.name for e in it if e.is_symlink()})
    except OSError:
        return set(names)


_LISTED = 16  # a folder holding this many of the paths checked is listed once for its links


# a URL's start: a scheme (fsspec's chained protocols "simplecache::s3://" too) and "://"
_URL_START = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*::)*[A-Za-z][A-Za-z0-9+.\-]*://")
_SPACE = re.compile(r"\s")  # where a URL in a text ends
# a query parameter whose value is a secret: ?password=, ?pass=, ?token=, ?access_token=,
# ?api_key=, ?sig= (Azure SAS), ?X-Amz-Signature= / X-Amz-Credential= / X-Amz-Security-Token=,
# ?X-Goog-Signature=, ?AWSAccessKeyId= ...: any name holding one of these words
_SECRET_PARAM = re.compile(r"([?&;][^=&;\s?#]*(?:pass|pwd|secret|token|sig|credential|auth|key)[^=&;\s?#]*=)"
                           r"([^&;\s]*)", re.IGNORECASE)
# a secret (or a piece of one) shorter than this is not searched for elsewhere in a text: "p"
# would hide the p of every "http"; the URL's own credential span is hidden whatever its length
MIN_SEARCHED = 6


def userinfo_span(url: str, start: int = 0) -> Optional[Tuple[int, int]]:
    """Where the credentials (``user:password`` or a lone token) of the URL that begins at
    ``start`` of ``url`` lie, as (first, end) offsets with ``url[end] == "@"``; None when it has
    none. The URL ends at the first whitespace.

    The rule: RFC 3986's userinfo ends at the LAST ``@`` of the authority, so
    ``redis://:p@ss@host`` has the password ``p@ss``. The authority ends at the first ``/``
    here, not at a ``?`` or ``#`` too as in the RFC: a raw ``?`` or ``#`` in a password is not
    RFC, but users type it (``redis://tok?en@host``). A raw ``/`` too (half of AWS secret keys
    hold one): so a ``:`` anywhere before a later ``@`` makes everything up to the last such
    ``@`` credentials (``s3://KEY:ab/cd@bucket/x`` has the secret ``ab/cd``; the user is what
    comes before the first ``:``). Both err on the safe side: ``http://host:80/a@b`` is shown
    ``http://host:***@b``, ``http://host?to=a@b`` ``http://***@b``. A lone token (no ``:``)
    with a raw ``/`` cannot be told from a path holding ``@`` (``gs://bucket/a@b``) and is
    taken as a path: percent-encode it (``%2F``)."""
    m = _URL_START.match(url, start)
    if m is None:
        return None
    first = m.end()
    ws = _SPACE.search(url, first)
    stop = ws.start() if ws else len(url)
    body = url[first:stop]
    authority = body.split("/", 1)[0]  # a raw ? or # in a password: up to the first / (see above)
    end = authority.rfind("@")
    colon = body.find(":")
    if colon >= 0:
        end = max(end, body.rfind("@"))
        if end < colon:  # the colon comes after every @: a port or a path, no credentials
            end = authority.rfind("@")
    return (first, first + end) if end >= 0 else None


def _pieces(secret: str) -> List[str]:
    """What of ``secret`` may show elsewhere in a library's message: the secret, its
    percent-decoded form, and its parts between URL delimiters (a library that misread the URL
    quotes a part of it)."""
    forms = {secret, unquote(secret)}
    for form in list(forms):
        forms.update(re.split(r"[@/:?#&=%]", form))
    return [f for f in forms if len(f) >= MIN_SEARCHED]


def redact(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with the credentials of every URL in it hidden: ``scheme://user:pw@host`` becomes
    ``scheme://user:***@host``, ``scheme://token@host`` (or ``:pw@``) ``scheme://***@host``, and
    the value of a query parameter named like a secret (``?password=``, ``?token=``, ``?sig=``,
    ``X-Amz-Signature``, ... :data:`_SECRET_PARAM`) ``***``. Where the credentials end:
    :func:`userinfo_span`. A secret (and each part of it, and its percent-decoded form) of
    :data:`MIN_SEARCHED` characters or more is hidden elsewhere in the text too, where a
    library's message may quote it without its URL (``KEY:SECRET@bucket``); a shorter one only
    in its URL. The secrets of the URLs ``known`` are hidden so too (a library's message about a
    URL, before the URL is put in front of it). Every path or URL that neardup prints or stores
    passes through here; nothing else of the text changes."""
    text = str(text)
    if "://" not in text and not known:  # no URL in it: nothing to hide (a local path, as most are)
        return text
    secrets: List[str] = []
    for url in known:
        _hide_urls(str(url), secrets)
    text = _hide_urls(text, secrets)
    for piece in sorted({p for s in secrets for p in _pieces(s)}, key=len, reverse=True):
        text = text.replace(piece, "***")
    return text


def _hide_urls(text: str, secrets: List[str]) -> str:
    """``text`` with the credential span and the secret query values of each URL in it hidden;
    the secrets hidden appended to ``secrets``."""
    out, pos = [], 0
    for m in _URL_START.finditer(text):
        if m.start() < pos:
            continue  # inside a URL already redacted (a password holding "x://")
        span = userinfo_span(text, m.start())
        ws = _SPACE.search(text, m.end())
        stop = ws.start() if ws else len(text)
        out.append(text[pos:m.end()])
        rest_from = m.end()
        if span is not None:
            info = text[span[0]:span[1]]
            user, sep, secret = info.partition(":")
            if sep and user:
                out.append(f"{user}:***")
                secrets.append(secret)
            else:
                out.append("***")
                secrets.append(info)
            rest_from = span[1]

        def hide(q: "re.Match") -> str:
            secrets.append(q.group(2))
            return q.group(1) + "***"

        out.append(_SECRET_PARAM.sub(hide, text[rest_from:stop]))
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def without_credentials(name: str) -> str:
    """``bucket/key`` for ``s3://bucket/key`` (``host/key`` for ``http://user:pw@host/key``: no
    credentials, where they end: :func:`userinfo_span`); a local name as it is."""
    if not is_url(name):
        return name
    span = userinfo_span(name)
    if span is not None:
        return name[span[1] + 1:]
    return name.partition("://")[2]


def join(base: str, *parts: str) -> str:
    """``base/part/...``: ``os.path.join`` for local paths, ``/`` for URLs."""
    if not is_url(base):
        return os.path.join(base, *parts)
    out = str(base)
    for p in parts:
        out = out.rstrip("/") + "/" + str(p).lstrip("/")
    return out


def basename(path: str) -> str:
    if not is_url(path):
        return os.path.basename(path)
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def dirname(path: str) -> str:
    if not is_url(path):
        return os.path.dirname(path)
    head, _, rest = str(path).partition("://")
    rest = rest.rstrip("/")
    return f"{head}://" + (rest.rsplit("/", 1)[0] if "/" in rest else rest)


def _posix(p: str) -> str:
    return p.replace(os.sep, "/") if os.sep != "/" else p


def common_folder(bases) -> Optional[str]:
    """The longest common folder of ``bases`` (URLs, or absolute local paths), by whole path
    components; None when there is none (local and remote paths, or URLs of two stores)."""
    split = [b.rstrip("/").split("/") if is_url(b) else _posix(b).rstrip("/").split("/") for b in bases]
    if not split:
        return None
    common = split[0]
    for parts in split[1:]:
        k = 0
        while k < min(len(common), len(parts)) and common[k] == parts[k]:
            k += 1
        common = common[:k]
    if is_url(bases[0]) and len(common) < 3:  # not even the same store
        return None
    if not common:
        return None
    return "/".join(common) or "/"


def relative_to(path: str, root: Optional[str]) -> str:
    """``path`` relative to the folder ``root`` (a :func:`common_folder`; its base name when it
    is not inside), with ``/`` between its parts."""
    full = path if is_url(path) else _posix(os.path.abspath(path))
    if root is not None:
        prefix = root.rstrip("/") + "/"
        if full.startswith(prefix):
            return full[len(prefix):]
    return basename(path)


def has_magic(path: str) -> bool:
    return _glob.has_magic(str(path))


def any_remote(paths) -> bool:
    """Whether any of ``paths`` is a URL (a run that touches a store)."""
    return any(is_url(p) for p in paths)
