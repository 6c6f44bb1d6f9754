#!/usr/bin/env python3
# Copyright (c) 2026 The crawl.py authors
# SPDX-License-Identifier: MIT
"""crawl.py: a web crawler on its own small coroutine runtime, in one file.

One thread, non-blocking sockets, a selector event loop, futures and
generator-based coroutines driven with ``yield from``: enough to keep
thousands of slow connections busy at once, with code that still reads top to
bottom like blocking code. Standard library only; no asyncio.

Run it:     python3 crawl.py --max-pages 50 xkcd.com   (python3 crawl.py --help)
Test it:    python3 -m unittest -v test_crawl
Vendor it:  copy this file into your project and import what __all__ lists
            (other names without an underscore are shared between sections,
            not promised to vendoring users).

A first reading (about an hour) follows one URL from the command line to a
socket and back through these, in the order they appear in the file:

   1. Future                  a result that arrives later; ``yield from future``
   2. Task._step, _wakeup     drive a coroutine: step it, wait on what it yields
   3. EventLoop._run_once     one iteration: select(), due timers, ready callbacks
   4. EventLoop.run_until_complete
   5. _wait_for_io            a socket not ready yet becomes a future to wait on
   6. connect, read_into, sendall     the socket calls, tried first, waited on after
   7. Stream                  a buffered reader over a socket (readuntil, readexactly)
   8. Queue.put, get, task_done, join     the frontier's waiting and counting
   9. normalize_url           one spelling per resource, for the seen set
  10. read_response           status line, fields, body framing (RFC 9112)
  11. Client.fetch            pool, connect, write the request, read the response
  12. link_from_tag, find_links      the links of a page (scan_links: the tokenizer)
  13. Crawler._discover       the seen set: each URL is queued once
  14. Crawler.crawl, _work, _process    workers take URLs, fetch, record, queue links
  15. main, _run_crawl        the command line: options, loop, signals, report

Then read the sections in order. A line "Skip on first reading: ..." above a
definition marks hardening that the lesson does not need (it covers that one
definition). The sections:

   -. Vocabularies            the options, error kinds and record fields
   1. Futures and tasks       a value that arrives later; a coroutine driven by futures
   2. The event loop          callbacks, timers and sockets in one select() loop
   3. Socket coroutines       sleep, connect, read, sendall, TLS, wait_for, Stream
   4. The queue               a FIFO of work with join(), for the crawler's frontier
   5. URLs                    parsing, normalization and resolution (RFC 3986)
   6. HTTP/1.1                requests and responses over raw sockets (RFC 9110/9112)
   7. Links                   the links of an HTML page
   8. robots.txt              the robots exclusion protocol (RFC 9309)
   9. The crawler             frontier, workers, seen set, politeness, records
  10. The report and the command line
  11. Making it fast          the fast link scanner and the resolution cache
"""

import array
import bisect
import codecs
import collections
import collections.abc
import errno
import functools
import heapq
import html.entities
import itertools
import logging
import operator
import os
import re
import selectors
import signal
import socket
import string
import struct
import sys
import threading
import time
import urllib.parse


# Skip on first reading: start-up time.
class _OnFirstUse:
    """A stand-in for what many runs never use but would pay for at start-up:
    a module to import, a regular expression to compile. make() runs when
    the first attribute is read through the stand-in (ssl.SSLError,
    _CSS_SKIP.match). Each attribute read is then kept on the stand-in, so
    that reading it again is a plain attribute read. This is the one way
    the file makes things lazily; use them through their attributes only
    (the stand-in itself is not the module or the pattern)."""

    def __init__(self, make, description):
        self._make, self._description, self._made = make, description, None

    def __getattr__(self, name):  # only for a name not read before
        if self._made is None:
            self._made = self._make()
        value = getattr(self._made, name)
        setattr(self, name, value)
        return value

    def __repr__(self):
        return f"<{self._description}, made on first use>"


# Skip on first reading: start-up time.
def _import_on_first_use(name):
    """What ``import name`` binds (the top-level package of a dotted name),
    imported on first use."""
    return _OnFirstUse(lambda: __import__(name), f"module {name}")


# Skip on first reading: start-up time.
def _compile_on_first_use(pattern, flags=0):
    """re.compile(pattern, flags) on first use."""
    return _OnFirstUse(lambda: re.compile(pattern, flags), f"re.compile({pattern[:30]!r}...)")


# Modules that only some runs need, imported on first use: a library user
# needs none of them, a crawl of plain HTML pages over http only argparse.
argparse = _import_on_first_use("argparse")  # the command line
concurrent = _import_on_first_use("concurrent.futures")  # threads: only DNS needs them
email = _import_on_first_use("email.utils")  # a Retry-After in the rare date form
json = _import_on_first_use("json")  # the --output file
ssl = _import_on_first_use("ssl")  # https
unicodedata = _import_on_first_use("unicodedata")  # host names that are not ASCII
xml = _import_on_first_use("xml.parsers.expat")  # --sitemaps
zlib = _import_on_first_use("zlib")  # compressed bodies

__version__ = "1.0"

__all__ = [
    # The runtime (sections 1-4).
    "CancelledError", "InvalidStateError", "Future", "Task", "current_task", "ensure_future",
    "wait_done", "Handle", "EventLoop", "get_event_loop", "set_event_loop",
    "get_running_loop", "run", "sleep", "wait_readable", "wait_writable", "connect", "read",
    "read_into", "read_all", "sendall", "getaddrinfo", "start_tls", "open_connection",
    "wait_for", "timeout", "gather", "Stream", "IncompleteReadError", "LimitOverrunError",
    "Queue", "QueueEmpty", "QueueFull",
    # URLs and HTTP (sections 5-6).
    "InvalidURL", "normalize_url", "split_url", "parse_root", "resolve_location",
    "Client", "fetch", "Response", "Fields", "HTTPError", "ProtocolError", "BodyTooLarge",
    "DecompressionBomb", "TruncatedBody", "ContentDecodingError", "read_response",
    # Links, robots.txt, the crawler and the command line (sections 7-10).
    "extract_links", "RobotsRules", "Crawler", "Record", "crawl", "main",
    # The vocabularies.
    "OPTIONS", "ERROR_KINDS", "RECORD_FIELDS",
]

logger = logging.getLogger("crawl")


# ---------------------------------------------------------------------------
# Vocabularies: options, error kinds, record fields
# ---------------------------------------------------------------------------
#
# A first reading may skip this section. It holds three tables that the rest
# of the file reads: the options (the command-line parser, the Client's and
# the Crawler's keyword defaults and checks, and README.md's options tables
# all come from OPTIONS), the error kinds a record can carry (ERROR_KINDS: is
# it a failure, is it retried) and the fields of a record (RECORD_FIELDS). A
# new option, kind or field is one entry here, plus its README row, which a
# test compares with the entry.

DEFAULT_USER_AGENT = f"crawl.py/{__version__} (+python)"
DEFAULT_MAX_BODY_SIZE = 10 * 1024 * 1024  # bytes: 10 MiB


class Option:
    """One setting. ``keyword`` is its name for Client, Crawler and crawl();
    ``flag`` its command-line spelling (None: a library keyword only);
    ``takes`` the component that uses it ("client", "crawler" or "cli");
    ``parse`` turns command-line text into a value (raising
    argparse.ArgumentTypeError) or is one of the markers SWITCH (a flag
    with no value that turns the default around), REGEXES (regular
    expressions, the flag repeated for each) and COUNT (-v, -vv); ``shown``
    is how help and README write the default."""

    __slots__ = ("keyword", "flag", "default", "takes", "parse", "metavar", "help", "shown")

    def __init__(self, keyword, flag, default, takes, parse=None, metavar=None, help="",
                 shown=None):
        self.keyword, self.flag, self.default, self.takes = keyword, flag, default, takes
        self.parse, self.metavar, self.help = parse, metavar, help
        self.shown = shown if shown is not None else str(default)

    def __repr__(self):
        return f"<Option {self.flag or self.keyword}>"


SWITCH, REGEXES, COUNT = "switch", "regexes", "count"


def whole_number(minimum):
    """A parse function for counts of at least minimum."""
    def check(value):
        if value < minimum:
            raise ValueError(f"must be at least {minimum}, got {value}")
        return value
    return _parse_function(int, "a whole number", check)


def seconds(allow_zero):
    """A parse function for a finite number of seconds (more than 0 unless
    allow_zero)."""
    def check(value):
        if value < 0 or (value == 0 and not allow_zero) or value != value or value == float("inf"):
            least = "0 or more" if allow_zero else "more than 0"
            raise ValueError(f"must be {least} seconds, got {value:g}")
        return value
    return _parse_function(float, "a number of seconds", check)


def _parse_function(convert, expected, check):
    """The command line's parse function: convert the text, then check the
    value. Its check() is the same rule for a value given as a keyword
    (take_options), which raises ValueError instead."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise _argument_error(f"expected {expected}, got {text!r}")
        try:
            return check(value)
        except ValueError as error:
            raise _argument_error(str(error))
    parse.check = check
    return parse


def byte_size(text):
    """A parse function for a size in bytes: a whole number, or one with a
    unit K, M or G (KiB, MiB, GiB: 1024-based), as in 512K, 10M or 10MiB."""
    match = re.fullmatch(r"\s*([-+]?\d+)\s*(?:([KMG])(?:i?B)?)?\s*", text, re.IGNORECASE)
    if match is None:
        raise _argument_error(f"expected a number of bytes such as 500000, 512K or 10M, "
                              f"got {text!r}")
    value = int(match.group(1)) * 1024 ** " KMG".index((match.group(2) or " ").upper())
    if value < 1:
        raise _argument_error(f"must be at least 1, got {text}")
    return value


def one_of(*values):
    """A parse function for one of a few words."""
    def parse(text):
        if text not in values:
            raise _argument_error(f"expected one of {', '.join(values)}; got {text!r}")
        return text
    return parse


def regular_expression(text):
    try:
        return re.compile(text)
    except re.error as error:
        raise _argument_error(f"not a valid regular expression {text!r}: {error}")


def _argument_error(message):
    return argparse.ArgumentTypeError(message)


OPTIONS = (
    # The crawl: how much, how fast, how deep.
    Option("max_tasks", "--max-tasks", 10, "crawler", whole_number(1), "N",
           "fetches at once, all hosts together (worker coroutines)"),
    Option("max_redirect", "--max-redirect", 10, "crawler", whole_number(0), "N",
           "redirects followed from one URL; 0 follows none"),
    Option("max_tries", "--max-tries", 4, "crawler", whole_number(1), "N",
           "attempts per URL on network errors, timeouts, 429 and 503"),
    Option("max_pages", "--max-pages", None, "crawler", whole_number(1), "N",
           "fetch at most N URLs, whatever their status or type (robots.txt not "
           "counted)", shown="no limit"),
    Option("max_depth", "--max-depth", None, "crawler", whole_number(0), "N",
           "follow links at most N hops from a root; the crawl then goes one depth at a "
           "time (each waits for its slowest URL), so that each URL counts its fewest hops, "
           "as with wget -r", shown="no limit"),
    Option("delay", "--delay", 0.0, "crawler", seconds(True), "SECONDS",
           "minimum gap between requests to one host; robots.txt Crawl-delay "
           "applies if larger", shown="0"),
    Option("backoff", None, 1.0, "crawler",
           help="seconds before the first retry; doubled for each further one"),
    Option("max_retry_after", None, 60.0, "crawler",
           help="longest Retry-After (seconds) honoured; a longer one is cut to this"),
    # Scope.
    Option("scope", "--scope", "host", "crawler", one_of("host", "subdomains", "origin", "path"),
           "SCOPE", "what is on the site: host (the roots' hosts, with or without www., any "
           "scheme or port), subdomains (and their subdomains), origin (scheme, host and port "
           "of a root), path (under a root's directory)"),
    Option("lenient", "--lenient", False, "crawler", SWITCH, None,
           "the old spelling of --scope subdomains", shown="off"),
    Option("external", "--external", False, "crawler", SWITCH, None,
           "check each off-site http(s) link once (HEAD, then GET if HEAD fails); "
           "never crawl it", shown="off"),
    Option("external_timeout", None, 10.0, "crawler", seconds(False),
           help="--timeout for an off-site link: a dead host should not hold a worker for long"),
    Option("external_tries", None, 2, "crawler", whole_number(1),
           help="--max-tries for an off-site link: one retry for a blip; its owner is not ours "
                "to hammer"),
    Option("fragments", "--fragments", False, "crawler", SWITCH, None,
           "check #name links to pages on the site against their id and <a name> anchors",
           shown="off"),
    Option("sitemaps", "--sitemaps", False, "crawler", SWITCH, None,
           "also start from the URLs of the site's sitemaps (robots.txt Sitemap: lines, else "
           "/sitemap.xml of a root's origin); the report counts orphans, URLs in a sitemap "
           "that no page links to", shown="off"),
    Option("exclude", "--exclude", (), "crawler", REGEXES, "REGEX",
           "skip URLs matching REGEX (repeatable)", shown="none"),
    Option("robots", "--no-robots", True, "crawler", SWITCH, None,
           "do not fetch or obey robots.txt", shown="off"),
    # Traps: URL spaces without end (what a defence cuts is recorded, by its kind).
    Option("max_url_length", "--max-url-length", 2083, "crawler", whole_number(1), "N",
           "longest URL fetched, in characters (the limit of Scrapy and of browsers' "
           "address bars)"),
    Option("max_path_segments", "--max-path-segments", 20, "crawler", whole_number(1), "N",
           "most segments in a URL's path (/a/b/ has 3)"),
    Option("max_segment_repeats", "--max-segment-repeats", 2, "crawler", whole_number(1), "N",
           "times a run of path segments may come in a row (/a/b/a/b/ has 2)"),
    Option("soft_404", "--no-soft-404", True, "crawler", SWITCH, None,
           "do not probe each origin with a path that cannot exist, so do not spot "
           "soft 404s (pages answered 200 for any path)", shown="off"),
    # The HTTP client.
    Option("timeout", "--timeout", 30.0, "client", seconds(False), "SECONDS",
           "total time for one fetch attempt, connecting included; retries and "
           "back-off come on top", shown="30"),
    Option("connect_timeout", None, 10.0, "client",
           help="seconds for each TCP connect and TLS handshake (within timeout)"),
    Option("read_timeout", None, None, "client",
           help="longest wait (seconds) for the next byte; None: only timeout applies"),
    Option("max_size", "--max-size", DEFAULT_MAX_BODY_SIZE, "client", byte_size, "BYTES",
           "largest body kept, after decompression; 512K, 10M and 1G (1024-based) "
           "are understood", shown=f"{DEFAULT_MAX_BODY_SIZE} = 10M"),
    Option("compression", "--no-compression", True, "client", SWITCH, None,
           "ask for every body as it is (Accept-Encoding: identity), not gzip or deflate: "
           "less work for both ends when the site is served from this machine or network",
           shown="off"),
    Option("user_agent", "--user-agent", DEFAULT_USER_AGENT, "client", None, "STRING",
           "User-Agent field; its first word is the robots.txt product token",
           shown=f"`{DEFAULT_USER_AGENT}`"),
    Option("accept", None, "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8", "client",
           help="Accept field"),
    Option("cafile", "--cafile", None, "client", None, "FILE",
           "also trust the CA certificates in FILE (PEM)", shown="none"),
    Option("verify", "--insecure", True, "client", SWITCH, None,
           "do NOT verify TLS certificates (the report says so)", shown="off"),
    Option("max_idle_per_origin", None, 10, "client",
           help="idle connections kept per origin"),
    Option("max_idle", None, 100, "client", help="idle connections kept in all"),
    # The command line only.
    Option("output", "-o/--output", None, "cli", None, "FILE",
           "write the records to FILE as JSON Lines, one line per URL as it "
           "finishes (the file is replaced); - for stdout, the report then goes "
           "to stderr", shown="none"),
    Option("quiet", "-q/--quiet", False, "cli", SWITCH, None,
           "print only the URLs that failed and the summary; no progress line",
           shown="off"),
    Option("show_unfetched", "--show-unfetched", False, "cli", SWITCH, None,
           "also list the URLs not fetched by choice (robots.txt, limits, "
           "interruption); they are always counted in the summary and written "
           "to --output", shown="off"),
    Option("verbose", "-v/--verbose", 0, "cli", COUNT, None,
           "log to stderr: -v for INFO (robots.txt per origin, retries, a status "
           "line every 10 s off a terminal; the report then lists the unfetched "
           "URLs and all linking pages of a failed URL), -vv for DEBUG (every "
           "fetch, every new connection)", shown="off"),
)


_OPTIONS_BY_KEYWORD = {option.keyword: option for option in OPTIONS}


def option_defaults(takes):
    """{keyword: default} of the options a component takes."""
    return {option.keyword: option.default for option in OPTIONS if option.takes == takes}


def take_options(takes, given, what):
    """The settings of one component: its defaults updated with the
    keywords given for it. TypeError for a keyword no component takes."""
    settings = option_defaults(takes)
    for keyword, value in given.items():
        if keyword not in settings:
            raise TypeError(f"{what} got an unexpected keyword argument {keyword!r}")
        check = getattr(_OPTIONS_BY_KEYWORD[keyword].parse, "check", None)
        if check is not None and value is not None:
            try:
                check(value)
            except ValueError as error:
                raise ValueError(f"{keyword} {error}") from None
        settings[keyword] = value
    return settings


class ErrorKind(collections.namedtuple("ErrorKind", "outcome retried meaning")):
    """outcome: FAILURE (the URL is broken: exit status 1), FETCHED (fetched,
    not a failure, but the crawler says something about it) or SKIPPED (not
    fetched by choice: counted, listed on request); retried: a fetch that
    ends with this kind is tried again (up to max_tries)."""

    __slots__ = ()

    @property
    def failure(self):
        return self.outcome == FAILURE


FAILURE, FETCHED, SKIPPED = "failure", "fetched", "skipped"


ERROR_KINDS = {
    # Failures: something is broken.
    "timeout": ErrorKind(FAILURE, True, "no answer within --timeout"),
    "refused": ErrorKind(FAILURE, False, "the connection was refused: nothing listens on that port "
                         "(not retried, as wget and curl do not)"),
    "connect": ErrorKind(FAILURE, True, "the host or its network is unreachable"),
    "dns": ErrorKind(FAILURE, False, "the host name does not resolve (a temporary DNS "
                     "failure is retried)"),
    "tls": ErrorKind(FAILURE, False, "the TLS handshake failed: certificate or protocol"),
    "reset": ErrorKind(FAILURE, True, "the server closed or reset the connection early"),
    "network": ErrorKind(FAILURE, True, "another network error"),
    "protocol": ErrorKind(FAILURE, False, "the response is not valid HTTP/1.x"),
    "too_large": ErrorKind(FAILURE, False, "a compressed body decodes past --max-size at over "
                           "100:1 (a decompression bomb)"),
    "truncated": ErrorKind(FAILURE, True, "the connection ended before the whole body"),
    "decoding": ErrorKind(FAILURE, False, "the gzip or deflate body could not be decoded"),
    "redirect_limit": ErrorKind(FAILURE, False, "a redirect loop, or more than --max-redirect"),
    "invalid_url": ErrorKind(FAILURE, False, "a link or Location that is not a valid URL"),
    "fragment": ErrorKind(FAILURE, False, "a #name link to a page that has no such id or "
                          "<a name> (--fragments)"),
    "sitemap": ErrorKind(FAILURE, False, "a sitemap that breaks the sitemaps.org protocol: not "
                         "a sitemap, not well-formed XML, a DOCTYPE, over 50,000 URLs or 50 MB "
                         "(--sitemaps)"),
    "internal": ErrorKind(FAILURE, False, "a bug in crawl.py; the crawl goes on"),
    # Fetched, and not failures.
    "cut_short": ErrorKind(FETCHED, False, "an HTML page larger than --max-size: its links "
                           "were taken from the first --max-size bytes"),
    "soft_404": ErrorKind(FETCHED, False, "answered as the origin answers a path that cannot "
                          "exist (a soft 404): fetched, its links not followed"),
    "no_sitemap": ErrorKind(FETCHED, False, "/sitemap.xml, tried by --sitemaps as robots.txt "
                            "names no sitemap, answered 4xx or an HTML page: the site has none"),
    # Not fetched by choice: not failures.
    "robots": ErrorKind(SKIPPED, False, "disallowed by robots.txt"),
    "max_depth": ErrorKind(SKIPPED, False, "deeper than --max-depth"),
    "max_pages": ErrorKind(SKIPPED, False, "past --max-pages"),
    "url_length": ErrorKind(SKIPPED, False, "longer than --max-url-length"),
    "path_segments": ErrorKind(SKIPPED, False, "more path segments than --max-path-segments"),
    "path_repeats": ErrorKind(SKIPPED, False, "a run of path segments repeated more than "
                              "--max-segment-repeats times"),
    "interrupted": ErrorKind(SKIPPED, False, "the crawl was interrupted first"),
}

NOT_FETCHED_KINDS = tuple(kind for kind, about in ERROR_KINDS.items() if about.outcome == SKIPPED)

# A field with no value is null (None), whatever its type.
RECORD_FIELDS = {
    "url": "the normalized URL (userinfo is never kept)",
    "status": "status code; null when there was no response",
    "reason": "reason phrase; null when there was no response",
    "content_type": "media type of the response, lower case; null when none",
    "charset": "charset parameter of the response; null when none",
    "size": "body bytes read, after transfer and content decoding (only HTML and CSS "
            "bodies are read)",
    "content_length": "the Content-Length field; null when there was none",
    "links": "distinct links found on the page",
    "new_links": "how many of those links were queued",
    "redirect": "the Location target of a redirect, else null",
    "error": "null, or a short message",
    "error_kind": "null, or the error's kind (ERROR_KINDS)",
    "failed": "true for an error or a 4xx/5xx status (what makes the exit status 1); "
              "false for a URL fine or not fetched by choice",
    "tries": "fetch attempts (0 for a URL not fetched)",
    "elapsed": "seconds from the first attempt to the end, back-off included",
    "depth": "links from a root: the fewest with --max-depth, else those of the path that "
             "found it first (a redirect keeps its source's depth)",
    "referrer": "the first page that linked to it, or the URL that redirected to it (with "
                "--max-depth, the first on a path of its depth)",
    "via": 'how it was found: "root", "link", "redirect", "sitemap" (listed in a sitemap, '
           'or /sitemap.xml), "robots.txt" (a sitemap it names), or the tag and attribute '
           'of a resource ("img src", "css url")',
    "linked_from": "for a failed URL, how many pages link or redirect to it, as far as "
                   "known when it finished (the report counts them all), else null",
    "referrers": "for a failed URL, the first 100 of those pages in URL order, else null",
}

# Fields computed from the others rather than stored.
COMPUTED_FIELDS = ("failed",)


# ---------------------------------------------------------------------------
# 1. Futures and tasks
# ---------------------------------------------------------------------------
#
# A Future is a slot for a result that is not there yet. Code that needs the
# result registers a "done callback"; whoever produces the result calls
# set_result(), and the loop then calls the callbacks.
#
# A Task drives a coroutine (a generator function used with ``yield from``).
# The coroutine runs until it needs a result that is not ready: it yields the
# Future it waits for, the Task adds a done callback to that future and steps
# the coroutine again when the callback fires. ``yield from future`` is how a
# coroutine waits; ``yield from other_coroutine()`` calls another coroutine,
# whose yields pass straight through to the Task.


class CancelledError(BaseException):
    """Raised in a coroutine whose task was cancelled, and by result() of a
    cancelled future.

    A BaseException (as asyncio's is since Python 3.8), so that a coroutine's
    ``except Exception`` does not swallow a cancellation.
    """


class InvalidStateError(Exception):
    """A future's result was set twice, or read before it was set."""


_PENDING = "pending"
_CANCELLED = "cancelled"
_FINISHED = "finished"


class Future:
    """A result (a value or an exception) that will be set later.

    States: pending, then either finished (set_result / set_exception) or
    cancelled (cancel). Done callbacks never run inside set_result: they are
    scheduled with the loop's call_soon, in the order they were added, each
    called with the future as its only argument.

    A coroutine waits for a future with ``result = yield from future`` (or
    ``await future`` in an ``async def``): it suspends while the future is
    pending, then gets the result, or the exception is raised in its frame.
    """

    __slots__ = ("_loop", "_state", "_result", "_exception", "_callbacks")

    def __init__(self, loop=None):
        self._loop = loop if loop is not None else get_event_loop()
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._callbacks = []

    def __repr__(self):
        return f"<{type(self).__name__} {self._state}>"

    def done(self):
        """True once the future is finished or cancelled."""
        return self._state != _PENDING

    def cancelled(self):
        return self._state == _CANCELLED

    def result(self):
        """The result; raises the exception that was set, CancelledError if
        the future was cancelled, InvalidStateError while it is pending."""
        if self._state == _FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result
        if self._state == _CANCELLED:
            raise CancelledError()
        raise InvalidStateError("result is not set yet")

    def exception(self):
        """The exception that was set, or None; raises like result() when
        cancelled or pending."""
        if self._state == _FINISHED:
            return self._exception
        if self._state == _CANCELLED:
            raise CancelledError()
        raise InvalidStateError("exception is not set yet")

    def add_done_callback(self, fn):
        """Call fn(future) from the loop once the future is done; at once
        (through call_soon) if it is done already."""
        if self._state == _PENDING:
            self._callbacks.append(fn)
        else:
            self._loop.call_soon(fn, self)

    def remove_done_callback(self, fn):
        """Remove every registration of fn; return how many were removed."""
        kept = [callback for callback in self._callbacks if callback != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def set_result(self, result):
        """Finish the future with a value; InvalidStateError if it is done."""
        if self._state != _PENDING:
            raise InvalidStateError(f"{self!r} is already done")
        self._result = result
        self._state = _FINISHED
        self._schedule_callbacks()

    def set_exception(self, exception):
        """Finish the future with an exception (a class or an instance)."""
        if self._state != _PENDING:
            raise InvalidStateError(f"{self!r} is already done")
        if isinstance(exception, type):
            exception = exception()
        if isinstance(exception, StopIteration):
            raise TypeError("StopIteration cannot be raised into a coroutine")
        self._exception = exception
        self._state = _FINISHED
        self._schedule_callbacks()

    def cancel(self):
        """Cancel a pending future; return False if it was already done."""
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._schedule_callbacks()
        return True

    def _schedule_callbacks(self):
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            self._loop.call_soon(fn, self)

    def __iter__(self):
        if self._state == _PENDING:
            yield self  # The task resumes us once this future is done.
        return self.result()

    __await__ = __iter__  # so that `await future` works in an async def


def _set_result_unless_done(future, result):
    if not future.done():
        future.set_result(result)


def _set_exception_unless_done(future, exception):
    if not future.done():
        future.set_exception(exception)


def wait_done(future):
    """Wait until future is done, without raising its exception."""
    waiter = Future(future._loop)
    future.add_done_callback(lambda _: _set_result_unless_done(waiter, None))
    yield from waiter


class Task(Future):
    """A Future that runs a coroutine and finishes with its return value.

    ``coro`` is a generator object (from a generator function that uses
    ``yield from``) or a native ``async def`` coroutine. Its first step is
    scheduled with call_soon, never run in the constructor.

    Each step resumes the coroutine until it yields:
      * a Future: the task sleeps until that future is done;
      * None (a bare ``yield``): the task gives up control for one iteration;
      * anything else is a mistake: a RuntimeError naming it is thrown in.
    When the coroutine returns, the task's result is the returned value; an
    exception it raises becomes the task's exception, traceback intact;
    KeyboardInterrupt and SystemExit are stored and also re-raised, so that
    they reach whoever runs the loop.
    """

    __slots__ = ("_coro", "_waiting_on", "_must_cancel", "_cancel_requests", "_exception_read",
                 "name")

    def __init__(self, coro, loop=None, name=None):
        if not (hasattr(coro, "send") and hasattr(coro, "throw")):
            raise TypeError(f"a coroutine or generator object is required, not {coro!r}")
        super().__init__(loop)
        self._coro = coro
        self._waiting_on = None  # the Future this task sleeps on, if any
        self._must_cancel = False
        self._cancel_requests = 0
        self._exception_read = False
        self.name = name or getattr(coro, "__qualname__", "task")
        self._loop.call_soon(self._step)

    def __repr__(self):
        return f"<Task {self.name} {self._state}>"

    def result(self):
        self._exception_read = True
        return super().result()

    def exception(self):
        self._exception_read = True
        return super().exception()

    def set_result(self, result):
        raise RuntimeError("a Task's result comes from its coroutine")

    def set_exception(self, exception):
        raise RuntimeError("a Task's exception comes from its coroutine")

    def cancel(self):
        """Ask the coroutine to stop: CancelledError is thrown into it at its
        next step (at once, through call_soon, if it is waiting on a future or
        a timer). The coroutine may catch it to clean up. The future it was
        waiting on is left alone: others may be waiting on it too.
        Returns False if the task is already done."""
        if self.done():
            return False
        self._cancel_requests += 1
        waiting_on = self._waiting_on
        if waiting_on is not None and not waiting_on.done():
            waiting_on.remove_done_callback(self._wakeup)
            self._waiting_on = None
            self._loop.call_soon(self._step, CancelledError())
        else:
            # A step is already scheduled (the first one, after a bare yield,
            # or a wake-up); it will throw CancelledError in.
            self._must_cancel = True
        return True

    def _step(self, error=None):
        if self.done():
            return
        if self._must_cancel:
            self._must_cancel = False
            if not isinstance(error, CancelledError):
                error = CancelledError()
        self._loop._current_task = self
        try:
            if error is None:
                yielded = self._coro.send(None)
            else:
                yielded = self._coro.throw(error)
        except StopIteration as stop:
            Future.set_result(self, stop.value)
        except CancelledError:
            Future.cancel(self)
        except Exception as exception:
            Future.set_exception(self, exception)
        except BaseException as exception:  # KeyboardInterrupt, SystemExit
            self._exception_read = True
            Future.set_exception(self, exception)
            raise
        else:
            self._wait_on(yielded)
        finally:
            self._loop._current_task = None

    def _wait_on(self, yielded):
        if yielded is None:  # a bare `yield`: run again next iteration
            self._loop.call_soon(self._step)
        elif isinstance(yielded, Future):
            self._waiting_on = yielded
            yielded.add_done_callback(self._wakeup)
            if self._must_cancel:  # cancel() was called during this step
                self._must_cancel = False
                self._cancel_requests -= 1  # cancel() counts it again
                self.cancel()
        else:
            self._loop.call_soon(self._step, RuntimeError(_bad_yield_message(yielded)))

    def _wakeup(self, future):
        # The coroutine is suspended inside Future.__iter__, which reads
        # future.result() itself: a value returns, an exception raises there.
        self._waiting_on = None
        self._step()

    # Skip on first reading: cancellation bookkeeping (cancelling, uncancel).
    def cancelling(self):
        """How many cancel() requests are outstanding (as asyncio's): a
        timeout that cancelled the task takes its own back with uncancel(),
        so it can tell a deadline from a real cancellation."""
        return self._cancel_requests

    def uncancel(self):
        """Withdraw one cancel() request; returns how many remain."""
        if self._cancel_requests > 0:
            self._cancel_requests -= 1
        return self._cancel_requests

    # Skip on first reading: logging an exception nobody retrieved.
    def __del__(self):
        if getattr(self, "_state", None) != _FINISHED:  # also a Task whose __init__ failed
            return
        if self._exception is not None and not self._exception_read:
            logger.error(
                "Task exception was never retrieved: %r", self,
                exc_info=(type(self._exception), self._exception, self._exception.__traceback__),
            )


# Skip on first reading: the message for a coroutine that yields the wrong thing.
def _bad_yield_message(yielded):
    if hasattr(yielded, "send") and hasattr(yielded, "throw"):
        return (f"a coroutine yielded the coroutine {yielded!r}: "
                "use `yield from` (or `await`) to run a coroutine, not `yield`")
    return (f"a coroutine yielded {yielded!r}, which is not a Future: "
            "wait with `yield from future`, or use a bare `yield` to let others run")


def current_task(loop=None):
    """The Task whose coroutine is running now (None outside any task)."""
    return (loop or get_event_loop())._current_task


def ensure_future(awaitable, loop=None):
    """Return awaitable if it is a Future, else wrap the coroutine in a Task."""
    if isinstance(awaitable, Future):
        return awaitable
    return Task(awaitable, loop)


# ---------------------------------------------------------------------------
# 2. The event loop
# ---------------------------------------------------------------------------
#
# The loop owns three things: a queue of callbacks ready to run, a heap of
# timers, and a selector that watches sockets. One iteration asks the
# selector which sockets are ready (waiting no longer than the next timer),
# moves their callbacks and the due timers to the ready queue, and then runs
# the callbacks in the ready queue at that moment: those already there, those
# of ready sockets and those of due timers. Callbacks they schedule wait for
# the next iteration.


class Handle:
    """A scheduled callback, returned by call_soon, call_later and call_at.

    ``cancel()`` stops it from running; ``when`` is its loop time in
    seconds, or None for call_soon."""

    __slots__ = ("_callback", "_args", "_loop", "cancelled", "when")

    def __init__(self, callback, args, loop, when=None):
        self._callback = callback
        self._args = args
        self._loop = loop
        self.cancelled = False
        self.when = when

    def __repr__(self):
        state = " cancelled" if self.cancelled else ""
        return f"<Handle {getattr(self._callback, '__qualname__', self._callback)}{state}>"

    def cancel(self):
        if not self.cancelled:
            self.cancelled = True
            if self.when is not None:
                self._loop._timer_cancelled()
            self._callback = self._args = None  # drop references early

    def _run(self):
        try:
            self._callback(*self._args)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:
            logger.exception("Exception in callback %r", self)


_current = threading.local()  # .running_loop, .default_loop for this thread


def get_running_loop():
    """The loop running in this thread; RuntimeError when none is running."""
    loop = getattr(_current, "running_loop", None)
    if loop is None:
        raise RuntimeError("no running event loop")
    return loop


def get_event_loop():
    """The loop running in this thread, else this thread's default loop
    (created on first use, or set with set_event_loop).

    This is how coroutines and Futures reach the loop without passing it
    around: inside ``loop.run_until_complete(...)`` it returns that loop."""
    loop = getattr(_current, "running_loop", None)
    if loop is None:
        loop = getattr(_current, "default_loop", None)
        if loop is None or loop.is_closed():
            loop = _current.default_loop = EventLoop()
    return loop


def set_event_loop(loop):
    """Make loop this thread's default loop (None forgets it)."""
    _current.default_loop = loop


class EventLoop:
    """Runs callbacks, timers and socket readiness callbacks in one thread.

    Times are seconds of ``time()`` (time.monotonic). File descriptors may be
    given as ints or socket objects; remove a socket's reader and writer
    (or forget_fd it) before closing it.
    """

    # Where a socket's reader and writer Handles are in its [reader, writer]
    # pair (in _watched, and the registration's data in the selector).
    _SLOT = {selectors.EVENT_READ: 0, selectors.EVENT_WRITE: 1}

    def __init__(self):
        self._selector = selectors.DefaultSelector()
        self._ready = collections.deque()  # Handles to run next iteration
        self._timers = []  # heap of (when, sequence, Handle)
        self._sequence = itertools.count()  # breaks ties: payloads never compared
        self._cancelled_timers = 0
        self._stopping = False
        self._running = False
        self._closed = False
        self._executor = None  # threads for blocking calls, made on first use
        self._current_task = None  # set by Task._step while a coroutine runs
        self._awaited = None  # the future run_until_complete waits for
        # fd number -> [reader Handle, writer Handle] (None where not watched),
        # also each registration's data in the selector. The loop's own table:
        # a look-up in the selector's map of an fd not watched (every
        # add_reader) raises and catches two KeyErrors (measured, callgrind:
        # an add_reader and remove_reader pair, 35,000 instructions that way, 24,700
        # with this).
        self._watched = {}
        # fd number -> (socket, its [None, None] data in the selector): sockets
        # that no reader watches but the selector still does (park_reader).
        self._parked = {}
        # A socket pair that call_soon_threadsafe writes to, to wake select().
        self._wakeup_reader, self._wakeup_writer = socket.socketpair()
        self._wakeup_reader.setblocking(False)
        self._wakeup_writer.setblocking(False)
        self.add_reader(self._wakeup_reader.fileno(), self._drain_wakeup)

    def __repr__(self):
        state = "closed" if self._closed else "running" if self._running else "idle"
        return f"<EventLoop {state} ready={len(self._ready)} timers={len(self._timers)}>"

    def time(self):
        """The loop's clock: monotonic seconds (float)."""
        return time.monotonic()

    # Scheduling callbacks --------------------------------------------------

    def call_soon(self, callback, *args):
        """Run callback(*args) in the next iteration, after those already
        scheduled; returns a Handle."""
        handle = Handle(callback, args, self)
        self._ready.append(handle)
        return handle

    def call_later(self, delay, callback, *args):
        """Run callback(*args) after delay seconds; returns a Handle."""
        return self.call_at(self.time() + delay, callback, *args)

    def call_at(self, when, callback, *args):
        """Run callback(*args) at loop time when (seconds); timers due at the
        same time run in the order they were scheduled."""
        handle = Handle(callback, args, self, when)
        heapq.heappush(self._timers, (when, next(self._sequence), handle))
        return handle

    # Skip on first reading: waking the loop from another thread.
    def call_soon_threadsafe(self, callback, *args):
        """call_soon from another thread: also wakes a blocked select()."""
        handle = self.call_soon(callback, *args)
        try:
            self._wakeup_writer.send(b"\0")
        except OSError:  # the socket buffer is full (already awake) or the loop closed
            pass
        return handle

    def _drain_wakeup(self):
        try:
            while self._wakeup_reader.recv(4096):
                pass
        except OSError:
            pass

    def _timer_cancelled(self):
        self._cancelled_timers += 1

    # Watching sockets -------------------------------------------------------

    def add_reader(self, fd, callback, *args):
        """Call callback(*args) whenever fd is readable, until remove_reader.
        Returns the Handle."""
        return self._add_io(fd, selectors.EVENT_READ, Handle(callback, args, self))

    def add_writer(self, fd, callback, *args):
        """Call callback(*args) whenever fd is writable, until remove_writer.
        Returns the Handle."""
        return self._add_io(fd, selectors.EVENT_WRITE, Handle(callback, args, self))

    def remove_reader(self, fd, handle=None):
        """Stop watching fd for reading; returns True if it was watched. With
        handle, only if that Handle is still the one registered (the fd may
        have been closed and its number reused since)."""
        return self._remove_io(fd, selectors.EVENT_READ, handle)

    def remove_writer(self, fd, handle=None):
        """Stop watching fd for writing; see remove_reader."""
        return self._remove_io(fd, selectors.EVENT_WRITE, handle)

    # Skip on first reading: keeping a socket in the selector between reads.
    def park_reader(self, sock, handle):
        """remove_reader(sock, handle) for a socket (object) that will be
        read again soon, as a connection between two responses: handle's
        callback no longer runs, but the selector keeps watching sock until
        the next add_reader(sock), which then needs no system call. Measured
        (callgrind): an add_reader and remove_reader pair costs 24,700
        instructions and two epoll_ctl calls, an add_reader and park_reader
        pair 10,800 and none; on the benchmark's crawl of 100,000 pages 0.7
        responses a page are waited for.
        A parked socket the selector reports ready (the peer sent something
        or closed while nobody reads) is unregistered then; close it only
        after forget_fd (as Stream.close does)."""
        number = sock.fileno()
        handles = self._watched.get(number)
        if handle is None or self._closed or handles != [handle, None]:
            return self.remove_reader(sock, handle)  # also written, or not this reader
        handles[0] = None
        del self._watched[number]
        self._parked[number] = (sock, handles)
        handle.cancel()
        return True

    def _rearm(self, number, fd, event, handle):
        """_add_io of a parked socket: True if it was still registered for
        reading, now for handle; else it is unparked, for a fresh start."""
        parked, handles = self._parked[number]
        if parked is fd and event == selectors.EVENT_READ and number == fd.fileno():
            del self._parked[number]
            handles[0] = handle
            self._watched[number] = handles
            return True
        self._unpark(number)  # for writing, or closed (and its number reused)
        return False

    def _unpark(self, number):
        """Stop the selector watching a parked socket (by fd number)."""
        del self._parked[number]
        self._selector.unregister(number)

    # Skip on first reading: selector bookkeeping for sockets closed while watched.
    def forget_fd(self, fd):
        """Stop watching fd before it is closed. Callbacks still registered
        for it run once more (soon), so that a coroutine waiting on it wakes
        up and finds it closed instead of waiting for ever."""
        if self._closed:
            return
        number = self._fd_number(fd)
        if number in self._parked:
            self._unpark(number)
        handles = self._watched.pop(number, None)
        if handles is None:
            return
        self._selector.unregister(fd)
        for handle in handles:
            if handle is not None and not handle.cancelled:
                self._ready.append(handle)

    def _fd_number(self, fd):
        """fd as an int: a socket's fileno(), or once it is closed the number
        it is watched with (the selector finds it by identity)."""
        if isinstance(fd, int):
            return fd
        number = fd.fileno()
        if number < 0:
            key = self._selector.get_map().get(fd)
            number = key.fd if key is not None else number
        return number

    def _add_io(self, fd, event, handle):
        # A socket can have a reader and a writer: a second interest modifies
        # the registration.
        self._check_closed()
        number = self._fd_number(fd)
        if number in self._parked and self._rearm(number, fd, event, handle):
            return handle
        handles = self._watched.get(number)
        if handles is None:
            handles = [None, None]
            handles[self._SLOT[event]] = handle
            self._selector.register(fd, event, handles)
            self._watched[number] = handles
            return handle
        old = handles[self._SLOT[event]]
        handles[self._SLOT[event]] = handle
        if old is not None:
            old.cancel()
        else:
            self._selector.modify(fd, selectors.EVENT_READ | selectors.EVENT_WRITE, handles)
        return handle

    def _remove_io(self, fd, event, handle=None):
        if self._closed:
            return False
        number = self._fd_number(fd)
        handles = self._watched.get(number)
        removed = handles[self._SLOT[event]] if handles is not None else None
        if removed is None or (handle is not None and removed is not handle):
            return False
        handles[self._SLOT[event]] = None
        if handles == [None, None]:
            del self._watched[number]
            self._selector.unregister(fd)
        else:
            other = selectors.EVENT_WRITE if event == selectors.EVENT_READ else selectors.EVENT_READ
            self._selector.modify(fd, other, handles)
        removed.cancel()
        return True

    # Running ----------------------------------------------------------------

    def _run_once(self):
        """One iteration: wait for I/O or the next timer, then run callbacks."""
        ready = self._ready
        if ready or self._stopping:
            timeout = 0
        elif self._timers:  # (capped: select() cannot wait for ever-far timers)
            timeout = min(max(0.0, self._timers[0][0] - self.time()), 24 * 3600.0)
        else:
            timeout = None  # nothing to do until a socket is ready

        for key, events in self._selector.select(timeout):
            reader, writer = key.data
            if reader is None and writer is None:  # parked, and nobody reads it now
                self._unpark(key.fd)
                continue
            if events & selectors.EVENT_READ and reader is not None:
                ready.append(reader)
            if events & selectors.EVENT_WRITE and writer is not None:
                ready.append(writer)

        self._move_due_timers()

        # This is the only place where callbacks are called. Only the
        # callbacks that are ready now run; those they schedule wait for the
        # next iteration, so that I/O is polled between them.
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle.cancelled:
                handle._run()

    def _move_due_timers(self):
        timers = self._timers
        if self._cancelled_timers > 100 and self._cancelled_timers * 2 > len(timers):
            # Most of the heap is cancelled timers: rebuild it without them.
            timers[:] = [entry for entry in timers if not entry[2].cancelled]
            heapq.heapify(timers)
            self._cancelled_timers = 0
        now = self.time()
        while timers and timers[0][0] <= now:
            handle = heapq.heappop(timers)[2]
            if handle.cancelled:
                self._cancelled_timers -= 1
            else:
                handle.when = None  # it is an ordinary ready callback now
                self._ready.append(handle)

    def run_forever(self):
        """Run iterations until stop() is called."""
        self._check_closed()
        if self._running:
            raise RuntimeError("this loop is already running")
        if getattr(_current, "running_loop", None) is not None:
            raise RuntimeError("another loop is running in this thread")
        self._running = True
        _current.running_loop = self
        try:
            while True:  # at least one iteration, even if stop() came first
                self._run_once()
                if self._stopping:
                    break
        finally:
            self._stopping = False
            self._running = False
            _current.running_loop = None

    def run_until_complete(self, awaitable):
        """Run until awaitable (a Future or a coroutine) is done; return its
        result or raise its exception.

        KeyboardInterrupt raised while the loop runs propagates to the caller
        and leaves the loop usable: call run_until_complete again to clean up
        (cancel tasks, flush files)."""
        if self._running:
            raise RuntimeError("this loop is already running")
        future = ensure_future(awaitable, self)
        self._awaited = future
        future.add_done_callback(self._stop_when_done)
        try:
            self.run_forever()
        finally:
            future.remove_done_callback(self._stop_when_done)
            self._awaited = None
        if not future.done():
            raise RuntimeError("the loop stopped before the future completed")
        return future.result()

    def _stop_when_done(self, future):
        # After a KeyboardInterrupt this call may still be queued when the
        # next run_until_complete starts: stop only for the future awaited now.
        if future is self._awaited:
            self.stop()

    def stop(self):
        """Stop run_forever after the current iteration."""
        self._stopping = True

    def is_running(self):
        return self._running

    def is_closed(self):
        return self._closed

    def _check_closed(self):
        if self._closed:
            raise RuntimeError("the event loop is closed")

    def close(self):
        """Close the selector, the wake-up sockets and the thread pool.
        Pending callbacks and timers are dropped."""
        if self._running:
            raise RuntimeError("cannot close a running loop")
        if self._closed:
            return
        self.remove_reader(self._wakeup_reader.fileno())
        self._closed = True
        self._ready.clear()
        self._timers.clear()
        self._watched.clear()
        self._parked.clear()
        self._selector.close()
        self._wakeup_reader.close()
        self._wakeup_writer.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    def pending_work(self):
        """(ready callbacks, live timers, watched file descriptors), not
        counting the loop's own wake-up socket: what tests check is zero
        after a clean shutdown."""
        if self._closed:
            return 0, 0, 0
        timers = sum(1 for entry in self._timers if not entry[2].cancelled)
        watched = len(self._watched) - 1
        ready = sum(1 for handle in self._ready if not handle.cancelled)
        return ready, timers, watched

    # Tasks and threads ------------------------------------------------------

    def create_task(self, coro, name=None):
        """Wrap coro in a Task on this loop; its first step runs soon."""
        return Task(coro, self, name)

    # Skip on first reading: blocking calls (DNS) in a worker thread.
    def run_in_thread(self, fn, *args):
        """Run the blocking call fn(*args) in a worker thread; returns a
        Future with its result or exception, resolved on this loop."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=8, thread_name_prefix="crawl-worker")
        future = Future(self)

        def copy_outcome(done):  # runs in the worker thread
            self.call_soon_threadsafe(_copy_future_outcome, done, future)

        self._executor.submit(fn, *args).add_done_callback(copy_outcome)
        return future


def _copy_future_outcome(source, destination):
    if destination.done():  # nobody waits any more (cancelled or timed out)
        return
    if source.exception() is not None:
        destination.set_exception(source.exception())
    else:
        destination.set_result(source.result())


def run(coro):
    """Run coro on a new loop until it is done, close the loop, return its
    result: the entry point for scripts (like asyncio.run). On Ctrl-C the
    main task is cancelled and given the chance to clean up (its finally
    blocks run) before KeyboardInterrupt goes on."""
    loop = EventLoop()
    main = loop.create_task(coro)
    try:
        return loop.run_until_complete(main)
    except KeyboardInterrupt:
        if not main.done():
            main.cancel()
            try:
                loop.run_until_complete(wait_done(main))
            except KeyboardInterrupt:  # a second Ctrl-C: leave now
                pass
        raise
    finally:
        loop.close()


# ---------------------------------------------------------------------------
# 3. Socket coroutines
# ---------------------------------------------------------------------------
#
# Each of these is a generator function: call it with ``yield from``. They use
# non-blocking sockets: try the system call first, and only when it would
# block, wait for the selector to say the socket is ready.

_WOULD_BLOCK = (BlockingIOError, InterruptedError)  # TLS sockets: ssl.SSLWantReadError


def sleep(seconds, result=None):
    """Suspend for seconds (float); return result. sleep(0) yields once."""
    if seconds <= 0:
        yield
        return result
    loop = get_event_loop()
    future = Future(loop)
    timer = loop.call_later(seconds, _set_result_unless_done, future, result)
    try:
        return (yield from future)
    finally:
        timer.cancel()


def _wait_for_io(sock, for_writing, timeout, park=False):
    # park: the socket will be read again soon (see EventLoop.park_reader).
    loop = get_event_loop()
    future = Future(loop)
    if for_writing:
        handle = loop.add_writer(sock, _set_result_unless_done, future, None)
    else:
        handle = loop.add_reader(sock, _set_result_unless_done, future, None)
    timer = None
    if timeout is not None:
        timer = loop.call_later(timeout, _time_out, future, timeout, for_writing)
    try:
        yield from future
    finally:
        if for_writing:
            loop.remove_writer(sock, handle)
        elif park:
            loop.park_reader(sock, handle)
        else:
            loop.remove_reader(sock, handle)
        if timer is not None:
            timer.cancel()


def _time_out(future, timeout, for_writing):
    action = "write to" if for_writing else "read from"
    _set_exception_unless_done(
        future, TimeoutError(f"timed out after {timeout:g} s waiting to {action} the socket"))


def wait_readable(sock, timeout=None):
    """Suspend until sock is readable; TimeoutError after timeout seconds."""
    return _wait_for_io(sock, False, timeout)


def wait_writable(sock, timeout=None):
    """Suspend until sock is writable; TimeoutError after timeout seconds."""
    return _wait_for_io(sock, True, timeout)


def connect(sock, address, timeout=None):
    """Connect the socket (made non-blocking) to address.

    Raises the OSError subclass that matches the socket's SO_ERROR, e.g.
    ConnectionRefusedError, and TimeoutError after timeout seconds."""
    sock.setblocking(False)
    error = sock.connect_ex(address)
    if error in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN, errno.EINTR):
        yield from wait_writable(sock, timeout)
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if error:
        raise OSError(error, f"{os.strerror(error)} (connecting to {_format_address(address)})")


def _format_address(address):
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def read(sock, max_bytes=65536, timeout=None):
    """Receive up to max_bytes (int) from sock; return bytes, b'' at EOF.

    Tries recv() first and waits for readability only when it would block,
    so data already buffered (by the kernel, or as decrypted TLS records)
    is returned without waiting. TimeoutError if no byte arrives within
    timeout seconds."""
    while True:
        try:
            return sock.recv(max_bytes)
        except _WOULD_BLOCK:
            for_writing = False
        except ssl.SSLWantReadError:  # (only a TLS socket raises these)
            for_writing = False
        except ssl.SSLWantWriteError:  # TLS needs to send before it can read
            for_writing = True
        # Wait outside the except clause: a coroutine suspended inside one
        # keeps the exception and its traceback alive for the whole wait.
        yield from _wait_for_io(sock, for_writing, timeout)


def read_into(sock, buffer, timeout=None, park=False):
    """Like read(), into buffer (a writable bytes-like object, e.g. a
    bytearray or memoryview); return the number of bytes, 0 at EOF. park:
    sock will be read again soon, leave it in the selector (a Stream's
    socket: see EventLoop.park_reader)."""
    while True:
        try:
            return sock.recv_into(buffer)
        except _WOULD_BLOCK:
            for_writing = False
        except ssl.SSLWantReadError:
            for_writing = False
        except ssl.SSLWantWriteError:
            for_writing = True
        yield from _wait_for_io(sock, for_writing, timeout, park)


def read_all(sock, timeout=None):
    """Receive until EOF; return all the bytes."""
    chunks = []
    while True:
        chunk = yield from read(sock, 65536, timeout)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def sendall(sock, data, timeout=None):
    """Send every byte of data (bytes-like), however many send() calls that
    takes; TimeoutError if the peer accepts nothing for timeout seconds."""
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view):]
            continue
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
            for_writing = True
        except ssl.SSLWantReadError:  # TLS needs to receive before it can send
            for_writing = False
        yield from _wait_for_io(sock, for_writing, timeout)


def _ascii_name(host):
    """A host name (str) for socket and ssl: as bytes when it is ASCII, as
    both encode a str name with the idna codec, whose first use imports it
    (measured: 1.5 ms of a crawl's start-up)."""
    return host.encode("ascii") if host.isascii() else host


# Skip on first reading: name resolution off the loop.
def getaddrinfo(host, port):
    """Resolve host (str) and port (int) to [(family, type, proto,
    canonname, sockaddr)] for TCP. IP literals are parsed at once; names are
    resolved in a worker thread so that DNS never blocks the loop. Raises
    socket.gaierror when the name does not resolve."""
    name = _ascii_name(host)
    try:
        return socket.getaddrinfo(name, port, type=socket.SOCK_STREAM,
                                  flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass  # not an IP literal
    loop = get_event_loop()
    try:
        return (yield from loop.run_in_thread(socket.getaddrinfo, name, port, 0,
                                              socket.SOCK_STREAM))
    except socket.gaierror as error:
        raise socket.gaierror(error.errno, f"{error.strerror} (resolving {host!r})") from None


# Skip on first reading: the TLS handshake on a non-blocking socket.
def start_tls(sock, context, server_hostname, timeout=None):
    """Wrap a connected socket in TLS and complete the handshake without
    blocking; return the ssl.SSLSocket. The certificate is verified and SNI
    sent as the context says (ssl.create_default_context() does both).
    Raises ssl.SSLError (ssl.SSLCertVerificationError for a certificate that
    does not verify), TimeoutError after timeout seconds. On error the socket
    is closed."""
    # ssl.SSLSocket, not asyncio's ssl.MemoryBIO + SSLObject: a BIO layer
    # saves a read() per TLS record (OpenSSL reads a record's 5-byte header
    # and its body apart), but on a 1,500-page HTTPS crawl it ran 2.5% more
    # instructions (copies through the BIOs, Python code on every read),
    # and saved no measurable CPU. TLS costs here are handshakes (5.5 M
    # instructions each), decrypting (55 k per 8 KB response) and loading
    # the system CA store (235 M, once; with a cafile only if needed: see
    # Client._trust_system_cas). Resuming one connection's TLS session on
    # the next ones saved 1.3% on a 50-connection crawl, but it reuses one
    # TLS 1.3 ticket, which RFC 8446 (appendix C.4) says clients should
    # not do: not done.
    name = server_hostname and _ascii_name(server_hostname)
    tls = context.wrap_socket(sock, server_hostname=name, do_handshake_on_connect=False)
    try:
        while True:
            try:
                tls.do_handshake()
                return tls
            except ssl.SSLWantReadError:
                for_writing = False
            except ssl.SSLWantWriteError:
                for_writing = True
            yield from _wait_for_io(tls, for_writing, timeout)
    except BaseException:
        tls.close()
        raise


def open_connection(host, port, *, ssl_context=None, server_hostname=None,
                    connect_timeout=None, read_timeout=None):
    """Connect to host:port (resolving the name off the loop, trying each
    address in turn, IPv6 and IPv4), optionally start TLS (server_hostname
    defaults to host), and return a Stream.

    Times in seconds: connect_timeout bounds each connection attempt and the
    TLS handshake; read_timeout becomes the stream's idle read timeout.
    Raises socket.gaierror, OSError (ConnectionRefusedError, ...),
    TimeoutError, ssl.SSLError. No socket is left open on any error."""
    addresses = yield from getaddrinfo(host, port)
    sock = None
    last_error = None
    for family, type_, proto, _, address in addresses:
        sock = socket.socket(family, type_, proto)
        try:
            yield from connect(sock, address, connect_timeout)
            break
        except OSError as error:
            sock.close()
            sock, last_error = None, error
        except BaseException:
            sock.close()
            raise
    if sock is None:
        raise last_error or OSError(f"no address for {host}")
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            sock = yield from start_tls(sock, ssl_context, server_hostname or host,
                                        connect_timeout)
    except BaseException:
        sock.close()
        raise
    return Stream(sock, read_timeout)


# Skip on first reading: deadlines (wait_for, timeout) and gather.
def wait_for(awaitable, timeout):
    """Wait for awaitable (a Future or coroutine), at most timeout seconds
    (None: no limit). On timeout the inner task is cancelled and the builtin
    TimeoutError raised; when the waiting coroutine is cancelled, the inner
    task is cancelled too."""
    loop = get_event_loop()
    inner = ensure_future(awaitable, loop)
    if timeout is None:
        return (yield from inner)
    expired = []
    timer = loop.call_later(timeout, _expire, inner, expired)
    try:
        return (yield from inner)
    except CancelledError:
        waiter = current_task(loop)
        if expired and not (waiter is not None and waiter.cancelling()):
            raise TimeoutError(f"timed out after {timeout:g} s") from None
        raise  # the waiting task itself was cancelled
    finally:
        timer.cancel()
        if not inner.done():
            inner.cancel()


def _expire(inner, expired):
    expired.append(True)
    inner.cancel()


class timeout:
    """A deadline for a block of code inside a task (as asyncio.timeout):

        with timeout(5.0):
            response = yield from client.fetch(url)

    If the block is still running after seconds (float), the current task
    is cancelled and the with statement raises the builtin TimeoutError
    instead of CancelledError. Cheaper than wait_for(): no second task.
    seconds None means no deadline."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.expired = False
        self._timer = None
        self._task = None

    def __enter__(self):
        if self.seconds is not None:
            task = current_task()
            if task is None:
                raise RuntimeError("timeout() must be used inside a task")
            self._task = task
            self._timer = task._loop.call_later(self.seconds, self._expire, task)
        return self

    def _expire(self, task):
        self.expired = True
        task.cancel()

    def __exit__(self, exc_type, exc, traceback):
        if self._timer is not None:
            self._timer.cancel()
        # Once the deadline has fired, take back its cancel request whatever
        # happened in the block; raise TimeoutError only if no other remains.
        if self.expired and self._task.uncancel() == 0 and exc_type is CancelledError:
            raise TimeoutError(f"timed out after {self.seconds:g} s") from None
        return False  # a cancellation that is not ours goes on


def gather(*awaitables):
    """Wait for all awaitables; return their results in order. The first
    exception is raised once every one of them is done. If the waiting
    coroutine is cancelled, they are all cancelled (not waited for)."""
    futures = [ensure_future(awaitable) for awaitable in awaitables]
    try:
        for future in futures:
            if not future.done():
                yield from wait_done(future)
    except CancelledError:
        for future in futures:
            future.cancel()
        raise
    for future in futures:  # the first error is raised; the others count as seen
        if not future.cancelled():
            future.exception()
    return [future.result() for future in futures]


class IncompleteReadError(EOFError):
    """EOF came before the expected bytes: ``partial`` holds what arrived,
    ``expected`` the byte count (or None for a missing separator)."""

    def __init__(self, partial, expected):
        what = f"{expected} bytes" if expected is not None else "the end of a line"
        super().__init__(f"connection closed after {len(partial)} bytes, before {what}")
        self.partial = partial
        self.expected = expected


class LimitOverrunError(Exception):
    """A line or block was longer than the limit given to the read."""


def _scratch_buffer():
    """A 64 KiB buffer that Streams receive into, one per thread: one
    recv_into() a shared buffer, rather than a fresh 64 KiB bytes object for
    every recv() on each of thousands of connections."""
    scratch = getattr(_current, "scratch", None)
    if scratch is None:
        scratch = _current.scratch = memoryview(bytearray(65536))
    return scratch


class Stream:
    """A buffered byte stream over a connected non-blocking socket (plain or
    TLS): the reads protocol code needs, so that it never parses raw recv()
    chunks by hand.

    read_timeout (seconds or None) bounds how long any single wait lasts,
    for the next byte to read or for room to write: TimeoutError. The
    counters bytes_received and bytes_sent count the stream's plaintext
    bytes (after TLS decryption, before encryption)."""

    def __init__(self, sock, read_timeout=None):
        self.sock = sock
        self.read_timeout = read_timeout
        self.bytes_received = 0
        self.bytes_sent = 0
        self._buffer = bytearray()
        self._eof = False

    def __repr__(self):
        return f"<Stream fd={self.sock.fileno()} buffered={len(self._buffer)}>"

    def fill(self):
        """Receive more bytes into the buffer; return False at EOF."""
        if self._eof:
            return False
        scratch = _scratch_buffer()
        count = yield from read_into(self.sock, scratch, self.read_timeout, park=True)
        if not count:
            self._eof = True
            return False
        self.bytes_received += count
        self._buffer += scratch[:count]
        return True

    def buffered(self):
        """How many bytes have been received but not read yet."""
        return len(self._buffer)

    def at_eof(self):
        """True when the peer closed and the buffer is empty."""
        return self._eof and not self._buffer

    def _take(self, count):
        """Remove and return the first count buffered bytes."""
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    def _ended_early(self, expected):
        """The error for an EOF before expected (a count, or None for a
        separator), holding (and removing) whatever was buffered."""
        return IncompleteReadError(self._take(len(self._buffer)), expected)

    def read(self, max_bytes=65536):
        """Return up to max_bytes bytes; b'' only at EOF."""
        if not self._buffer and not (yield from self.fill()):
            return b""
        return self._take(max_bytes)

    def readexactly(self, count):
        """Return exactly count bytes; IncompleteReadError at an early EOF."""
        while len(self._buffer) < count:
            if not (yield from self.fill()):
                raise self._ended_early(count)
        return self._take(count)

    def take_until(self, separator, limit=65536):
        """Without waiting: the buffered bytes up to and including the first
        separator (bytes, or a compiled bytes regex), removed from the
        buffer; None if it has not arrived yet. LimitOverrunError when it
        does not occur within limit bytes."""
        if isinstance(separator, bytes):
            index = self._buffer.find(separator)
            end = index + len(separator) if index >= 0 else -1
        else:
            match = separator.search(self._buffer)
            end = match.end() if match else -1
        if end < 0 and len(self._buffer) <= limit:
            return None  # not here yet, and there is still room for it
        if end < 0 or end > limit:
            raise LimitOverrunError(f"no {getattr(separator, 'pattern', separator)!r} "
                                    f"within {limit} bytes")
        return self._take(end)

    def readuntil(self, separator=b"\n", limit=65536):
        """Return bytes up to and including separator (bytes, or a compiled
        bytes regex). LimitOverrunError when limit bytes arrive without it;
        IncompleteReadError when the stream ends first."""
        while True:
            data = self.take_until(separator, limit)
            if data is not None:
                return data
            if not (yield from self.fill()):
                raise self._ended_early(None)

    def readline(self, limit=65536):
        """Return one line including its b'\\n' (see readuntil)."""
        return self.readuntil(b"\n", limit)

    def write(self, data):
        """Send all of data (bytes-like)."""
        yield from sendall(self.sock, data, self.read_timeout)
        self.bytes_sent += memoryview(data).nbytes

    def close(self):
        """Close the socket; safe to call twice. A coroutine waiting on the
        socket is woken and finds it closed (OSError)."""
        if not self.closed:
            # The loop it was read on: the running one, or once the loop has
            # stopped (Client.close() after run_until_complete) this thread's.
            loop = getattr(_current, "running_loop", None) or getattr(_current, "default_loop", None)
            if loop is not None:
                loop.forget_fd(self.sock.fileno())
        self.sock.close()

    @property
    def closed(self):
        return self.sock.fileno() < 0


# ---------------------------------------------------------------------------
# 4. The queue
# ---------------------------------------------------------------------------


class QueueEmpty(Exception):
    """get_nowait() on an empty queue."""


class QueueFull(Exception):
    """put_nowait() on a full queue."""


class Queue:
    """A FIFO queue for coroutines, with join() for "all work is done".

    maxsize <= 0 means unbounded. Every put() adds one unfinished item;
    task_done() marks one finished; join() waits until none is unfinished.
    """

    def __init__(self, maxsize=0):
        self.maxsize = maxsize
        self._items = collections.deque()
        self._getters = collections.deque()  # Futures of coroutines in get()
        self._putters = collections.deque()  # Futures of coroutines in put()
        self._unfinished = 0
        self._joiners = []  # Futures of coroutines in join()

    def __repr__(self):
        return f"<Queue size={len(self._items)} unfinished={self._unfinished}>"

    def qsize(self):
        return len(self._items)

    def empty(self):
        return not self._items

    def full(self):
        return 0 < self.maxsize <= len(self._items)

    @property
    def unfinished(self):
        """Items put but not yet marked with task_done()."""
        return self._unfinished

    def put_nowait(self, item):
        """Add item at once; QueueFull if the queue is full."""
        if self.full():
            raise QueueFull()
        self._items.append(item)
        self._unfinished += 1
        _wake_first(self._getters)

    def put(self, item):
        """Add item, waiting while the queue is full."""
        while self.full():
            yield from self._wait(self._putters)
        self.put_nowait(item)

    def get_nowait(self):
        """Remove and return the first item; QueueEmpty if there is none."""
        if not self._items:
            raise QueueEmpty()
        item = self._items.popleft()
        _wake_first(self._putters)
        return item

    def get(self):
        """Remove and return the first item, waiting while there is none."""
        while not self._items:
            yield from self._wait(self._getters)
        return self.get_nowait()

    def _wait(self, waiters):
        waiter = Future()
        waiters.append(waiter)
        try:
            yield from waiter
        except CancelledError:
            # If we were woken and then cancelled, pass the wake-up on, so
            # that the item (or the free slot) we were told about is not lost.
            if waiter in waiters:
                waiters.remove(waiter)
            elif waiter.done():
                _wake_first(waiters)
            raise

    def task_done(self):
        """Mark one item finished; ValueError if called more than put()."""
        if self._unfinished <= 0:
            raise ValueError("task_done() called more times than items were put")
        self._unfinished -= 1
        if self._unfinished == 0:
            joiners, self._joiners = self._joiners, []
            for joiner in joiners:
                _set_result_unless_done(joiner, None)

    def join(self):
        """Wait until every item put has been marked with task_done()."""
        if self._unfinished:
            joiner = Future()
            self._joiners.append(joiner)
            yield from joiner


def _wake_first(waiters):
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return


# ---------------------------------------------------------------------------
# 5. URLs
# ---------------------------------------------------------------------------
#
# A link means what a browser makes of it: normalize_url() reads http(s)
# URLs as the WHATWG URL Standard does where that differs from RFC 3986 in
# the resource named ("\" as "/", slashes before the host, IPv4 number
# forms, international names by UTS #46). And two URLs that name the same
# resource must look the same before they meet the crawler's seen set, or
# the page is fetched twice: it then applies RFC 3986 §6.2.2 (case,
# percent-encoding and path segment normalization). The HTTP client uses
# split_url() for the parts of a request.

DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    """A URL that cannot be fetched as it stands: no host, a bad port, an
    invalid IPv6 literal or international name, a scheme other than http
    and https. The message says which."""


def split_url(url):
    """Split an http(s) URL into (scheme, host, port, target): host in its
    ASCII (IDNA) form without brackets, port an int, target the
    percent-encoded path and query (RFC 9112 §3.2). Userinfo is dropped,
    never sent. ValueError for another scheme, a missing or invalid host or
    a bad port."""
    scheme, authority, path, query, _ = _URI_REFERENCE.match(url.strip()).groups()
    scheme = (scheme or "").lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidURL(f"unsupported URL scheme {scheme!r} in {url!r}: only http and https")
    host_and_port = _AUTHORITIES.get(authority)
    if host_and_port is None:
        host_and_port = parse_authority(authority or "", url)
        if len(_AUTHORITIES) < 1000:
            _AUTHORITIES[authority] = host_and_port
    host, port = host_and_port
    target = request_target(path, query)
    if query == "":  # "/p?" is not "/p" (RFC 3986 §6.2.3): the empty query is sent
        target += "?"
    return scheme, host, port or DEFAULT_PORTS[scheme], target


# (host, port) of the authorities split_url() has parsed: a crawl fetches
# from the same few again and again (measured, callgrind: split_url of a
# page's URL, 26,000 instructions parsing "127.0.0.1:8000" each time, 15,000
# with this).
_AUTHORITIES = {}

# RFC 3986 Appendix B: the regular expression that splits any URI reference
# into scheme, authority, path, query and fragment (missing parts are None).
_URI_REFERENCE = re.compile(
    r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)


# The code points the WHATWG URL standard forbids in a host.
_FORBIDDEN_IN_HOST = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")


def parse_authority(netloc, url=None):
    """(host, port) of an authority "user@host:port": host as parse_host()
    gives it (no brackets for IPv6), port an int or None. ValueError for a
    missing or invalid host or port."""
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        literal, bracket, port = hostport[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            raise InvalidURL(f"invalid IPv6 address in {url or netloc!r}")
        try:
            host = ipv6_address(socket.inet_pton(socket.AF_INET6, literal))
        except (OSError, ValueError):
            raise InvalidURL(f"invalid IPv6 address [{literal}] in {url or netloc!r}") from None
        port = port[1:]
    else:
        if hostport.count(":") > 1:
            raise InvalidURL(f"IPv6 addresses need brackets, as in http://[::1]:8000/: "
                             f"{url or netloc!r}")
        host, _, port = hostport.partition(":")
        if not host:
            raise InvalidURL(f"no host in {url or netloc!r}")
        host = parse_host(host)
    if not port:
        return host, None
    # Leading zeros are allowed ("080" is 80); past five digits, int() is
    # not asked (it refuses more than 4,300 digits).
    number = port.lstrip("0")
    if (not port.isdigit() or not port.isascii() or len(number) > 5
            or not 0 < int(number or "0") <= 65535):
        raise InvalidURL(f"invalid port {port!r} in {url or netloc!r}")
    return host, int(number)


def ipv6_address(packed):
    """The 16 bytes of an IPv6 address written as the URL Standard writes
    them (§3.7, RFC 5952's form): lower-case hex, the first longest run of
    two or more zero pieces as "::". socket.inet_ntop writes an embedded
    IPv4 address in dotted form ("::ffff:1.2.3.4"), where the standard has
    hex ("::ffff:102:304"), so the serializer is written out."""
    pieces = [int.from_bytes(packed[i:i + 2], "big") for i in range(0, 16, 2)]
    start, length = -1, 1
    for index in range(8):
        run = 0
        while index + run < 8 and pieces[index + run] == 0:
            run += 1
        if run > length:
            start, length = index, run
    text = ":".join(f"{piece:x}" for piece in pieces)
    if start < 0:
        return text
    head = ":".join(f"{piece:x}" for piece in pieces[:start])
    tail = ":".join(f"{piece:x}" for piece in pieces[start + length:])
    return f"{head}::{tail}"


# The URL Standard's host parser for http(s), but for IPv6 literals
# (parse_authority). The plain cases, an ASCII name that needs nothing but
# lower case and an IPv4 address in dotted decimal, are each one regular
# expression; the rest is skipped on first reading.
_PLAIN_HOST = re.compile(r"(?:(?!xn--)[a-z0-9_\-]{1,63}\.)*"
                         r"(?!xn--|[0-9]+\.?\Z|0x[0-9a-f]*\.?\Z)[a-z0-9_\-]{1,63}\.?\Z", re.I)
_BYTE = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_DECIMAL = re.compile(rf"(?:{_BYTE}\.){{3}}{_BYTE}\Z")


def parse_host(host):
    """The host of an http(s) URL as the WHATWG URL Standard's host parser
    gives it: percent-decoded, an international name in its ASCII form
    (ascii_host), lower case, a number in any IPv4 form ("0x7f.1") as
    dotted decimal ("127.0.0.1"). InvalidURL for what that parser rejects
    (a forbidden code point, a bad IPv4 number, a bad "xn--" label) and,
    stricter than a browser, for a name that no DNS lookup can carry (an
    empty label, a label over 63 or a name over 253 octets): the browser
    fails at the lookup with the same name, the crawler says why at once."""
    if _DOTTED_DECIMAL.match(host):
        return host
    if len(host) <= 253 and _PLAIN_HOST.match(host):
        return host.lower()  # the common case: nothing to decode, map or check
    if "%" in host:  # UTF-8, lossy: U+FFFD then fails as a host
        host = urllib.parse.unquote(host, errors="replace")
    host = ascii_host(host)
    forbidden = _FORBIDDEN_IN_HOST.search(host)
    if forbidden:
        raise InvalidURL(f"invalid character {forbidden.group()!r} in host {host!r}")
    if _ends_in_number(host):
        return ipv4_address(host)
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if "" in labels:
        raise InvalidURL(f"invalid host name {host!r}: an empty label")
    if max(map(len, labels)) > 63 or len(host) > 253:
        raise InvalidURL(f"invalid host name {host!r}: too long for DNS")
    return host


# Skip on first reading: the numeric IPv4 forms browsers accept (URL Standard
# §3.5, the IPv4 parser): 1 to 4 parts, each decimal, octal (leading 0) or
# hex (0x); the last part fills the remaining bytes ("192.168.257" is
# 192.168.1.1). socket.inet_aton reads the same forms, but also takes
# whitespace and trailing text on some platforms, so it is written out here.
_HEX_NUMBER = re.compile(r"0[xX][0-9A-Fa-f]*\Z")
_IPV4_NUMBER = re.compile(r"0[xX]([0-9A-Fa-f]*)\Z|(0[0-7]*)\Z|([1-9][0-9]*)\Z")


def _ends_in_number(host):
    last = host[:-1] if host.endswith(".") else host
    last = last.rpartition(".")[2]
    if not last:
        return False
    return last.isdigit() and last.isascii() or _HEX_NUMBER.match(last) is not None


def _ipv4_number(part, host):
    match = _IPV4_NUMBER.match(part)
    if match is None:
        raise InvalidURL(f"invalid IPv4 address {host!r}: bad part {part!r}")
    hexadecimal, octal, decimal = match.groups()
    if hexadecimal is not None:
        return int(hexadecimal or "0", 16)
    # Eleven digits are out of range already; int() refuses more than 4,300.
    return int(octal, 8) if octal is not None else int(decimal[:11])


def ipv4_address(host):
    """A host that ends in a number, as a dotted-decimal IPv4 address."""
    parts = (host[:-1] if host.endswith(".") else host).split(".")
    if len(parts) > 4:
        raise InvalidURL(f"invalid IPv4 address {host!r}: more than 4 parts")
    numbers = [_ipv4_number(part, host) for part in parts]
    last = numbers.pop()
    if any(number > 255 for number in numbers) or last >= 256 ** (4 - len(numbers)):
        raise InvalidURL(f"invalid IPv4 address {host!r}: a part out of range")
    address = last
    for index, number in enumerate(numbers):
        address += number << (24 - 8 * index)
    return socket.inet_ntoa(address.to_bytes(4, "big"))


# Skip on first reading: international names, UTS #46 non-transitional.
# The standard library's "idna" codec is IDNA 2003 (RFC 3490): it maps "ß"
# to "ss" and "ς" to "σ", where browsers (UTS #46 non-transitional
# processing, which the URL Standard uses) keep them: "faß.example" is
# "xn--fa-hia.example". What unicodedata and encodings.punycode allow:
# - mapping: case folding then NFKC (what UTS #46's table is built from),
#   but the deviation characters ß, ς, ZWJ and ZWNJ kept, and the common
#   "ignored" code points (soft hyphen, zero-width space, variation
#   selectors, ...) removed; ideographic full stops separate labels;
# - validity: NFC, no leading combining mark, no private-use, surrogate,
#   control, space or noncharacter code point, ZWJ/ZWNJ in context (CONTEXTJ), "xn--"
#   labels that decode to a mapped label. Unassigned code points pass:
#   unicodedata is Unicode 13 on Python 3.9 and 15.1 on 3.13, and a name
#   must get the same answer from each (the DNS lookup has the last word);
# - then Punycode (RFC 3492) for each label that is not ASCII.
# Left out, as they need tables the standard library lacks: the exact
# per-code-point status of the UTS #46 table (a few symbols browsers reject
# pass here, and fail at the DNS lookup), CheckBidi (RFC 5893: "يa" passes
# here), and the joining types of CONTEXTJ's rule for ZWNJ (approximated:
# between two Arabic-script letters).
_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")
_IGNORED_IN_HOST = str.maketrans(dict.fromkeys(map(ord, (
    "\u00ad\u034f\u180b\u180c\u180d\u180f\u200b\u2060\ufeff"
    + "".join(map(chr, range(0xfe00, 0xfe10)))))))
_NOT_IN_HOST_CATEGORIES = frozenset(("Co", "Cs", "Cc", "Zs", "Zl", "Zp"))


def ascii_host(host):
    """The ASCII form of a host name (UTS #46 ToASCII, non-transitional,
    as browsers do; see above): lower case, each international label
    Punycode-encoded. InvalidURL for a name that cannot be valid."""
    if host.isascii():
        host = host.lower()
        if "xn--" in host:
            for label in host.split("."):
                if label.startswith("xn--"):
                    _check_label(_decode_punycode(label, host), host)
        return host
    labels = []
    for label in _map_host(host).split("."):
        if label.startswith("xn--"):
            _check_label(_decode_punycode(label, host), host)
        elif not label.isascii():
            _check_label(label, host)
            label = "xn--" + label.encode("punycode").decode("ascii")
        labels.append(label)
    return ".".join(labels)


def _map_host(text):
    mapped = "".join(char if char in _DEVIATIONS
                     else unicodedata.normalize("NFKC", char.casefold())
                     for char in text.translate(_IGNORED_IN_HOST))
    return unicodedata.normalize("NFC", mapped).replace("\u3002", ".")


def _decode_punycode(label, host):
    """The Unicode form of an "xn--" label, which must be one that mapping
    leaves as it is (UTS #46 §4.1: only "valid" code points)."""
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except UnicodeError:
        decoded = ""
    if not decoded or decoded.isascii() or _map_host(decoded) != decoded:
        raise InvalidURL(f"invalid international host name {host!r}: bad label {label!r}")
    return decoded


def _joiner_allowed(label, index):
    # RFC 5892 Appendix A.1-A.2 (CONTEXTJ): after a virama; for ZWNJ also
    # between two joining letters, approximated as two Arabic-script letters
    # (bidi class AL), non-spacing marks between skipped.
    if index and unicodedata.combining(label[index - 1]) == 9:
        return True
    if label[index] == "\u200d":
        return False
    return all(unicodedata.bidirectional(_letter_beside(label, index, step)) == "AL"
               for step in (-1, 1))


def _letter_beside(label, index, step):
    index += step
    while 0 <= index < len(label) and unicodedata.category(label[index]) == "Mn":
        index += step
    return label[index] if 0 <= index < len(label) else " "


def _check_label(label, host):
    problem = _label_problem(label)
    if problem:
        raise InvalidURL(f"invalid international host name {host!r}: {problem}")


def _label_problem(label):
    if unicodedata.normalize("NFC", label) != label:
        return "not in NFC"
    if unicodedata.category(label[0]).startswith("M"):
        return "a label starts with a combining mark"
    for index, char in enumerate(label):
        code = ord(char)
        if (unicodedata.category(char) in _NOT_IN_HOST_CATEGORIES or char == "\ufffd"
                or 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE):  # noncharacters
            return f"code point U+{code:04X} not allowed"
        if char in "\u200c\u200d" and not _joiner_allowed(label, index):
            return f"U+{ord(char):04X} (a zero-width joiner) out of its context"
    return None


_NEEDS_NO_ENCODING = re.compile(r"[A-Za-z0-9\-._~/:@!$&'()*+,;=?]*\Z")
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def percent_encode(text, safe):
    """Percent-encode what is not safe (non-ASCII as UTF-8), keeping every
    '%': an existing %XX escape is never encoded twice, and a lone '%'
    stays '%', as in the URL Standard (request_target escapes it)."""
    if _NEEDS_NO_ENCODING.match(text) and ("?" not in text or "?" in safe):
        return text  # the common case: nothing to encode
    return urllib.parse.quote(text, safe=safe + "%")


PATH_SAFE = "/:@!$&'()*+,;=-._~"
QUERY_SAFE = PATH_SAFE + "?"
# The URL Standard's fragment percent-encode set leaves every printable
# ASCII character but space, '"', '<', '>' and '`'.
FRAGMENT_SAFE = QUERY_SAFE + "#[\\]^{|}"


def request_target(path, query):
    """The origin-form request target: path ("/" if empty) and query. A
    lone '%' is sent as "%25": a URL may hold one, a request target may not
    (RFC 9112 §3.2 takes RFC 3986's pct-encoded = "%" HEXDIG HEXDIG)."""
    target = _escape_lone_percent(percent_encode(path, PATH_SAFE)) or "/"
    if not target.startswith("/"):
        target = "/" + target
    if query:
        target += "?" + _escape_lone_percent(percent_encode(query, QUERY_SAFE))
    return target


def _escape_lone_percent(text):
    return _LONE_PERCENT.sub("%25", text) if "%" in text else text


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
LINK_WHITESPACE = " \t\n\f\r"  # the ASCII whitespace the HTML standard strips
_C0_AND_SPACE = "".join(map(chr, range(0x21)))  # what the URL parser strips around a URL
_REMOVED_INSIDE = str.maketrans("", "", "\t\n\r")  # as browsers do (WHATWG URL)


def _normalize_escape(match):
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def normalize_component(text, safe):
    """Percent-encode what must be (never re-encoding an escape), then
    uppercase escapes and decode escaped unreserved characters."""
    text = percent_encode(text, safe)
    if "%" not in text:
        return text
    if _LONE_PERCENT.search(text):  # rare: see _normalize_escape_not_hex
        return _ESCAPE.sub(_normalize_escape_not_hex, text)
    return _ESCAPE.sub(_normalize_escape, text)


# Skip on first reading: escapes beside a lone "%".
def _normalize_escape_not_hex(match):
    # Beside a lone '%', a decoded hex digit could make a new escape that
    # names another resource: "%%34%31" is "%41" to a server, but would
    # become "%41" and then "A". So hex digits stay escaped there.
    char = chr(int(match.group(1), 16))
    if char in _UNRESERVED and char not in string.hexdigits:
        return char
    return "%" + match.group(1).upper()


def remove_dot_segments(path):
    """Resolve "." and ".." segments of a path (RFC 3986 §5.2.4)."""
    if "/." not in path and not path.startswith("."):
        return path
    output = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


def normalize_url(link, base=None):
    """Resolve link (str) against base (an absolute URL, or None) and return
    the normalized absolute http(s) URL (str), or None when the link is not
    one to follow: empty, fragment-only, or another scheme (mailto:, tel:,
    javascript:, data:, ftp:, ...).

    Rules: the WHATWG URL Standard's parser for http(s) URLs, where it
    differs from RFC 3986 in the resource named: C0 controls and spaces
    around the link are stripped and TAB, LF and CR inside it removed; "\\"
    is "/" before the query; any number of slashes may follow "http:" (or
    start a scheme-relative link: "///host/p"); the host is parsed as
    parse_host() says (IPv4 number forms, international names). Then RFC
    3986 normalization that keeps the resource: the fragment and any
    userinfo are dropped; scheme and host are lower-cased, the default port
    dropped; an empty path becomes "/"; dot-segments are removed; an empty
    query "?" is kept; percent-escapes get upper-case hex, escaped
    unreserved characters are decoded (never %2F), other characters that
    need it are percent-encoded (UTF-8), an existing escape is never
    encoded twice and a lone "%" stays. ValueError (with the reason) for a
    URL that cannot be valid: a bad port, an invalid host, no host."""
    link = _clean_link(link)
    if not link or link[0] == "#":
        return None
    scheme = _SCHEME.match(link)
    if scheme:
        scheme = scheme.group()[:-1].lower()
        if scheme not in DEFAULT_PORTS:
            return None
        rest = link[len(scheme) + 1:]
        # "http:x" and "http:/x" name no host when the base has the same
        # scheme: read as relative then, as browsers do; otherwise any
        # number of slashes lead to the host (URL Standard, "special
        # authority slashes" and "special relative or authority" states).
        if base is None or rest.startswith("//") or scheme != split_base(base)[0]:
            return _normalize_absolute(scheme, rest.lstrip("/"), link)
        link = rest
    if base is None:
        return None
    base_scheme, authority, base_path, base_query = split_base(base)
    if link.startswith("//"):  # a scheme-relative link: only the scheme is the base's
        return _normalize_absolute(base_scheme, link.lstrip("/"), link)
    return _resolve_path(link, base_scheme, authority, base_path, base_query)


def _clean_link(link):
    link = link.strip(_C0_AND_SPACE)
    if "\t" in link or "\n" in link or "\r" in link:
        link = link.translate(_REMOVED_INSIDE)
    if "\\" in link:  # in an http(s) URL a backslash is "/", but in the query and fragment
        end = _QUERY_OR_FRAGMENT.search(link)
        end = end.start() if end else len(link)
        link = link[:end].replace("\\", "/") + link[end:]
    return link


_QUERY_OR_FRAGMENT = re.compile(r"[?#]")


def _normalize_absolute(scheme, rest, link):
    """The normalized URL of scheme "://" rest, rest the authority and
    what follows it (link as written, for messages)."""
    authority, path, query, _ = _AFTER_SCHEME.match(rest).groups()
    host, port = parse_authority(authority, link)
    if ":" in host:
        host = f"[{host}]"
    authority = host if port is None or port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
    # Escapes first, then dot-segments: "%2E%2E" is ".." (RFC 3986 §6.2.2.3).
    path = remove_dot_segments(normalize_component(path, PATH_SAFE)) or "/"
    if query is None:
        return f"{scheme}://{authority}{path}"
    return f"{scheme}://{authority}{path}?{normalize_component(query, QUERY_SAFE)}"


_AFTER_SCHEME = re.compile(r"([^/?#]*)([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)


def _resolve_path(link, scheme, authority, base_path, base_query):
    """Resolve a relative reference (no scheme, no authority) against the
    parts of a normalized base URL (RFC 3986 §5.2.2)."""
    link = link.partition("#")[0]
    path, question, query = link.partition("?")
    query = normalize_component(query, QUERY_SAFE) if question else None
    if not path:
        path = base_path
        if not question:
            query = base_query  # normalized already; None for none
    else:
        # Escapes first, then dot-segments: "%2E%2E" is ".." (RFC 3986 §6.2.2.3).
        path = normalize_component(path, PATH_SAFE)
        if path[0] != "/":  # merge with the base's directory (RFC 3986 §5.2.3)
            path = base_path[:base_path.rfind("/") + 1] + path
        path = remove_dot_segments(path)
    if query is None:
        return f"{scheme}://{authority}{path}"
    return f"{scheme}://{authority}{path}?{query}"


def url_origin(url):
    """(scheme, host, port) of a normalized URL: what a connection pool
    and robots.txt are keyed by."""
    scheme, _, rest = url.partition("://")
    authority = rest.split("/", 1)[0]
    host, port = split_authority(authority)
    return scheme, host, port or DEFAULT_PORTS[scheme]


def url_host(url):
    """The host of a normalized URL (lower case, no port, no brackets)."""
    return split_authority(url.split("/", 3)[2])[0]


def split_authority(authority):
    if authority.startswith("["):  # an IPv6 literal
        host, _, port = authority[1:].partition("]")
        port = port[1:]
    else:
        host, _, port = authority.partition(":")
    return host, int(port) if port else None


def url_target(url):
    """The path and query of a normalized URL: what robots.txt rules match."""
    rest = url.partition("://")[2]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


def resolve_location(location, url):
    """Resolve a Location field value against the request URL (RFC 9110
    §10.2.2). The value arrives as latin-1 text: raw bytes that are not
    ASCII are percent-encoded as they stand (they are almost always UTF-8).
    Returns the normalized URL, None for a non-http(s) target; ValueError
    for an invalid one."""
    raw = location.encode("latin-1", "replace")
    encoded = urllib.parse.quote(raw, safe="".join(map(chr, range(0x21, 0x7F))))
    return normalize_url(encoded, url)


def link_host(link):
    """The host a link names, lower case and as written (not validated:
    the link may be invalid), or None for a link with no authority."""
    link = _clean_link(link)
    scheme = _SCHEME.match(link)
    rest = link[scheme.end():] if scheme else link
    if not rest.startswith("//"):
        return None
    authority = _AFTER_SCHEME.match(rest.lstrip("/")).group(1)
    if not authority:
        return None
    host = authority.rpartition("@")[2].lower()
    return host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]


def parse_root(text):
    """A root as given on the command line ("xkcd.com", "localhost:8000",
    "https://host/path") as a normalized URL; no scheme means http://.
    Read like any link (the URL Standard: "http:/host" has a host), and
    checked as fully before anything is fetched: InvalidURL for another
    scheme, no host, an invalid host ("bad..host", ".git") or a bad port
    ("localhost:abc")."""
    text = text.strip(_C0_AND_SPACE)
    scheme = _SCHEME.match(text)
    if scheme is None or scheme.group()[:-1].lower() not in DEFAULT_PORTS:
        if scheme and (text.startswith("//", scheme.end()) or not _HOST_AND_PORT.match(text)):
            raise InvalidURL(f"unsupported URL scheme {scheme.group()[:-1]!r} in {text!r}: "
                             "only http and https")
        text = "http://" + text
    url = normalize_url(text)
    if url is None:
        raise InvalidURL(f"not a URL that can be crawled: {text!r}")
    return url


# "host:port" rather than "scheme:...": digits after the colon, or a name
# that is no URL scheme ("localhost", a dotted name).
_HOST_AND_PORT = re.compile(r"[^:/]+:\d*(?:/|\Z)|(?:localhost|[^:/]*\.[^:/]*):", re.I)


# ---------------------------------------------------------------------------
# 6. HTTP/1.1
# ---------------------------------------------------------------------------
#
# A client that speaks HTTP/1.1 (RFC 9110 semantics, RFC 9112 syntax) over
# the runtime's Streams: it writes a request, reads the status line and the
# field section, works out the message body length, reads the body (chunked
# or not), decodes gzip or deflate, and keeps the connection for the next
# request to the same origin when that is safe.

MAX_FIELD_SECTION_BYTES = 64 * 1024  # a response head (status lines, fields); trailers
MAX_FIELD_COUNT = 200
# A body not wanted (read_body said no) is read and dropped when at most
# this much of it is left, to keep the connection; a longer one closes it.
DRAIN_LIMIT = 64 * 1024
# gzip makes HTML 3 to 15 times smaller; a body that decodes past max_size at
# more than this ratio is a decompression bomb, not a large page.
MAX_COMPRESSION_RATIO = 100
IDEMPOTENT_METHODS = {"GET", "HEAD"}


class HTTPError(Exception):
    """Base of the HTTP errors: the server's message broke a rule, or the
    body could not be read or decoded in full.

    ``url`` is the request URL; ``response`` is the partial Response when
    the status line and fields had arrived (else None); ``kind`` is the
    short error kind a crawler records."""

    kind = "protocol"  # each subclass names its own kind (ERROR_KINDS)

    def __init__(self, message, url=None, response=None):
        super().__init__(f"{url}: {message}" if url else message)
        self.message = message  # without the URL
        self.url = url
        self.response = response


class ProtocolError(HTTPError):
    """The response is not valid HTTP/1.x (status line, fields, framing)."""

    kind = "protocol"


class BodyTooLarge(HTTPError):
    """The body is longer than the client's max_size; the partial
    response holds the first max_size bytes."""

    kind = "too_large"


class DecompressionBomb(BodyTooLarge):
    """A compressed body that decodes past max_size at more than
    MAX_COMPRESSION_RATIO to 1."""

    kind = "too_large"


class TruncatedBody(HTTPError):
    """The connection ended before the body's declared length."""

    kind = "truncated"


class ContentDecodingError(HTTPError):
    """The Content-Encoding could not be decoded (corrupt or unsupported)."""

    kind = "decoding"


class Fields:
    """An HTTP field section (RFC 9110 §5): names are case-insensitive,
    repeated fields are kept in the order received.

    ``get(name)`` combines repeated fields with ", " (RFC 9110 §5.3);
    ``get_all(name)`` gives the list of values."""

    __slots__ = ("_pairs", "_by_name")

    def __init__(self, pairs=()):
        self._pairs = list(pairs)
        self._by_name = by_name = {}
        for name, value in self._pairs:
            key = name.lower()
            values = by_name.get(key)
            if values is None:
                by_name[key] = [value]
            else:
                values.append(value)

    def add(self, name, value):
        self._pairs.append((name, value))
        self._by_name.setdefault(name.lower(), []).append(value)

    def get(self, name, default=None):
        values = self._by_name.get(name.lower())
        return ", ".join(values) if values else default

    def get_all(self, name):
        return list(self._by_name.get(name.lower(), ()))

    def __contains__(self, name):
        return name.lower() in self._by_name

    def __getitem__(self, name):
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def items(self):
        """(name, value) pairs as received."""
        return list(self._pairs)

    def __len__(self):
        return len(self._pairs)

    def __repr__(self):
        return f"Fields({self._pairs!r})"


class Response:
    """A response as received.

    url (str), status (int), reason (str), http_version (str, "HTTP/1.1"),
    headers (Fields), body (bytes, after transfer and content decoding),
    content_type (str, lower case, no parameters, "" if absent), charset
    (str or None, from Content-Type), wire_bytes (int: bytes received for
    it, status line and fields included), truncated (bool: the body is
    partial; only seen on the response attached to an HTTPError), elapsed
    (float seconds from the start of the fetch, connecting included, to
    the end of the body), body_read (bool: False when read_body declined
    the body), content_length (int or None: the Content-Length field)."""

    __slots__ = ("url", "status", "reason", "http_version", "headers", "body",
                 "wire_bytes", "truncated", "elapsed", "body_read", "content_length",
                 "content_type", "charset")

    def __init__(self, url, status, reason, http_version, headers, body=b""):
        self.url = url
        self.status = status
        self.reason = reason
        self.http_version = http_version
        self.headers = headers
        self.body = body
        self.content_type, self.charset = content_type_facts(headers.get("content-type") or "")
        self.wire_bytes = 0
        self.truncated = False
        self.elapsed = 0.0
        self.body_read = True
        self.content_length = None

    def __repr__(self):
        return f"<Response {self.status} {self.url} {len(self.body)} bytes>"

    @property
    def location(self):
        """The Location field (str) or None."""
        return self.headers.get("location")


# Read once per response, not at each reading of Response.content_type and
# .charset (the crawler asks each response for both, some twice), and cached:
# a crawl sees the same few Content-Type values (measured, callgrind: a
# response made and read as the crawler does, 22,000 instructions with
# properties parsing the field at each reading, 6,400 with this).
def content_type_facts(content_type):
    """(media type, charset) of a Content-Type value, as Response has them."""
    if len(content_type) > 100:  # not cached: a server chooses its length
        return _content_type_facts(content_type)
    return _cached_content_type_facts(content_type)


def _content_type_facts(content_type):
    return content_type.split(";", 1)[0].strip().lower(), parse_charset(content_type)


_cached_content_type_facts = functools.lru_cache(maxsize=256)(_content_type_facts)


# RFC 9110 §5.6.6: parameters = *( OWS ";" OWS [ parameter ] ), parameter =
# name "=" ( token / quoted-string ). A quoted string may hold ";" and "=".
# (email.message parses these too, but costs 10 us a response and 18 ms to
# import; test_crawl checks this pattern against it.)
_PARAMETER = re.compile(r"""[ \t]*;[ \t]*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*=[ \t]*"""
                        r"""("(?:[^"\\]|\\.)*"?|[^;]*)""")
_QUOTED_PAIR = re.compile(r"\\(.)")


def parse_charset(content_type):
    """The charset parameter of a Content-Type value (lower case), or None."""
    start = content_type.find(";")
    if start < 0:
        return None
    for name, value in _PARAMETER.findall(content_type, start):
        if name.lower() == "charset":
            if value.startswith('"'):
                value = _QUOTED_PAIR.sub(r"\1", value[1:-1] if value.endswith('"') else value[1:])
            value = value.strip().strip("'").strip().lower()  # some servers quote with '
            return value or None
    return None


# Parsing a response ---------------------------------------------------------


# The leniencies kept, each safe because it cannot make two parsers disagree
# on where a line, a field or the body ends: a bare LF ends a line as CRLF
# does (RFC 9112 §2.2); obsolete line folding is unfolded into one SP
# (§5.2); a missing reason phrase is fine (§4); whitespace around a chunk
# size is ignored, and the CRLF after the last trailer may be missing at
# the end of the connection (§7.1); empty lines between an interim (1xx)
# response and the next are skipped (§2.2's robustness rule for requests,
# as some servers send one after "100 Continue"). Not kept: a bare CR and
# a NUL (see _invalid_octet).

def _invalid_octet(data):
    """Why the lines of a head (the status line, the field lines, the
    trailers) or a chunk-size line are invalid, or None: a CR is only ever
    part of a CRLF line end; NUL is nowhere. RFC 9112 §2.2
    and RFC 9110 §5.5 let a recipient either reject these or replace each
    with SP; this rejects them. A bare CR that another parser (a proxy, a
    cache) takes as a line end makes the two see different fields: the
    response splitting these rules exist against. Replacing it with SP
    would hide that disagreement and record a reason or a Content-Type the
    server never meant; rejecting it records the fault as it is."""
    if b"\0" in data:
        return "a NUL"
    if data.count(b"\r") != data.count(b"\r\n"):  # two counts: C speed, no per-line loop
        return "a bare CR"
    return None


def parse_status_line(line, url=None):
    """Parse b'HTTP/1.1 200 OK\\r\\n' into ("HTTP/1.1", 200, "OK").

    The grammar is HTTP-version SP 3DIGIT [SP reason-phrase] (RFC 9112 §4);
    a missing reason phrase is fine; a code below 100 is not a status
    (RFC 9110 §15). ProtocolError otherwise, naming the bytes seen; also
    for a bare CR or a NUL anywhere in the line."""
    invalid = _invalid_octet(line)
    if invalid:
        raise ProtocolError(f"invalid status line {bytes(line[:100])!r}: {invalid}", url)
    text = line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line
    version, _, rest = text.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if (len(version) != 8 or not version.startswith(b"HTTP/1.") or not version[7:8].isdigit()
            or len(code) != 3 or not code.isdigit() or code < b"100"):
        raise ProtocolError(f"invalid status line {bytes(line[:100])!r}", url)
    return version.decode("ascii"), int(code), reason.strip().decode("latin-1")


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 §5.6.2


def parse_fields(lines, url=None):
    """Parse field lines (str, decoded as latin-1, without the blank line
    ending the section) into Fields. Line endings (CRLF or a bare LF) are
    ignored; obsolete line folding (a line starting with SP or HTAB) is
    unfolded into the previous value (RFC 9112 §5.2). ProtocolError for a
    line that is not name: value. (read_response rejects a bare CR or a NUL
    in the bytes before they get here.)"""
    pairs = []
    for line in lines:
        line = line[:-1] if line.endswith("\n") else line  # one line end, no more
        line = line[:-1] if line.endswith("\r") else line
        if line[:1] in (" ", "\t"):
            if not pairs:
                raise ProtocolError(f"continuation line before any field {line[:100]!r}", url)
            name, value = pairs.pop()
            pairs.append((name, value + " " + line.strip(" \t")))
            continue
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise ProtocolError(f"invalid field line {line[:100]!r}", url)
        pairs.append((name, value.strip(" \t")))
    return Fields(pairs)


# Skip on first reading: the field lines of the common shape in one call.
# measured (callgrind): a third fewer instructions than parse_fields for
# nginx's eight fields. An obsolete fold (a line starting with SP or HTAB)
# or an invalid line is not matched at its start ("^"), so the count of
# lines tells it apart. (A bare CR was rejected before: see _invalid_octet.)
_PLAIN_FIELD_LINE = re.compile(
    r"^(%s):[ \t]*((?:[^\r\n]*[^\r\n \t])?)[ \t]*\r?\n" % _TOKEN.pattern, re.M)


def _plain_fields(text):
    """Fields of a field block (str, the blank line included) whose every
    line is name: value, as parse_fields() reads them; None for another."""
    pairs = _PLAIN_FIELD_LINE.findall(text)
    return Fields(pairs) if len(pairs) == text.count("\n") - 1 else None


# The blank line that ends a field section: right at the start (no fields)
# or after the last field line; CRLF or a bare LF: rb"(?:^|\n)\r?\n". It is
# matched from its last LF, which the regex engine scans for at C speed,
# and then looked behind for: LF (CR) LF, or (CR) LF at the very start
# (measured, callgrind: 46,000 instructions a response the plain way, which
# tries a match at every position; 9,000 this way; test_crawl checks they agree).
_END_OF_FIELDS = re.compile(rb"\n(?:(?<=\n\r\n)|(?<=\n\n)|(?<=\A\r\n)|(?<=\A\n))")


def _read_field_block(stream, budget, url, too_large, what="field"):
    """Read field lines up to and including the blank line (the fields of
    a head, or the trailers after a chunked body: what says which); returns
    the bytes. ProtocolError(too_large) when they exceed budget bytes, and
    for a bare CR or a NUL in them."""
    try:
        block = yield from stream.readuntil(_END_OF_FIELDS, budget)
    except LimitOverrunError:
        raise ProtocolError(too_large, url) from None
    invalid = _invalid_octet(block)
    if invalid:
        raise ProtocolError(f"invalid {what} line {_faulty_line(block)!r}: {invalid}", url)
    return block


def _faulty_line(block):
    """The first line of block holding a NUL or a bare CR (for messages)."""
    for line in bytes(block).split(b"\n"):
        if _invalid_octet(line + b"\n"):
            return line[:100]
    return block[:100]


def _read_head(stream, url):
    """Read the status line and field section of the final response,
    skipping interim 1xx responses (RFC 9110 §15.2) and empty lines after
    them. Returns (version, status, reason, Fields). The status line is
    checked before the fields are waited for, so that a server that is not
    HTTP fails at once."""
    budget = MAX_FIELD_SECTION_BYTES  # for the whole head, interim responses included
    too_large = f"response head larger than {MAX_FIELD_SECTION_BYTES} bytes"
    after_interim = False
    while True:
        try:
            line = yield from stream.readline(budget)
        except LimitOverrunError:
            raise ProtocolError(too_large, url) from None
        budget -= len(line)
        if after_interim and line in (b"\r\n", b"\n"):
            continue  # a stray empty line after "100 Continue" (some servers send one)
        version, status, reason = parse_status_line(line, url)
        block = yield from _read_field_block(stream, budget, url, too_large)
        budget -= len(block)
        text = block.decode("latin-1")
        if text.count("\n") - 1 > MAX_FIELD_COUNT:  # the lines but the blank one
            raise ProtocolError(f"more than {MAX_FIELD_COUNT} fields", url)
        fields = _plain_fields(text)
        if fields is None:
            fields = parse_fields(text.split("\n")[:-2], url)  # without the blank line
        if status == 101:
            raise ProtocolError("101 Switching Protocols was not asked for", url)
        if status >= 200:
            return version, status, reason, fields
        after_interim = True


def _content_length(fields, url):
    """The Content-Length as an int, or None when absent. Identical values,
    repeated or listed, are one value; conflicting or invalid values are a
    ProtocolError (RFC 9110 §8.6)."""
    values = fields.get_all("content-length")
    if not values:
        return None
    # The common case, one value, without the set (measured, callgrind: 8,900
    # instructions with it, 6,000 without).
    if len(values) == 1 and "," not in values[0]:
        length = values[0].strip()
    else:
        lengths = {part.strip() for value in values for part in value.split(",")}
        if len(lengths) != 1:
            raise ProtocolError(f"conflicting Content-Length values {values!r}", url)
        length = lengths.pop()
    if not length.isdigit() or not length.isascii() or len(length) > 18:
        raise ProtocolError(f"invalid Content-Length {length[:40]!r}", url)
    return int(length)


def _transfer_codings(fields):
    return [coding.strip().lower()
            for value in fields.get_all("transfer-encoding")
            for coding in value.split(",") if coding.strip()]


def body_framing(method, status, fields, url=None):
    """How the body's length is known, in the order of RFC 9112 §6.3.

    Returns (framing, length, reusable): framing is "none", "chunked",
    "length" (length is the byte count) or "close" (read until the server
    closes); reusable is False when the connection must not carry another
    request whatever the rest of the response says."""
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return "none", 0, True
    codings = _transfer_codings(fields)
    if codings:
        if codings != ["chunked"]:
            raise ProtocolError(f"unsupported Transfer-Encoding {', '.join(codings)!r}", url)
        # Chunked wins over Content-Length, but a message with both is
        # suspect (request smuggling): do not reuse its connection.
        return "chunked", None, "content-length" not in fields
    length = _content_length(fields, url)
    if length is not None:
        return "length", length, True
    return "close", None, False


def wants_keep_alive(http_version, fields):
    """Whether the server lets the connection persist (RFC 9112 §9.3):
    HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with keep-alive."""
    options = {option.strip().lower() for option in (fields.get("connection") or "").split(",")}
    if "close" in options:
        return False
    return http_version != "HTTP/1.0" or "keep-alive" in options


# Skip on first reading: gzip and deflate, bounded against compression bombs.
class ContentDecoder:
    """Collects a body, decoding its Content-Encoding as it arrives and
    keeping at most max_size decoded bytes.

    feed(data) returns False once the limit is reached (the body is cut
    there); ContentDecodingError for corrupt or unsupported codings.
    Supported: identity, gzip / x-gzip, and deflate both as RFC 1950
    zlib-wrapped data and as the raw DEFLATE stream many servers send."""

    def __init__(self, content_encoding, max_size, url=None):
        names = (c.strip().lower() for c in content_encoding.split(",")) if content_encoding else ()
        codings = [c for c in names if c and c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise ContentDecodingError(f"unsupported Content-Encoding {content_encoding!r}", url)
        self.coding = codings[0] if codings else None
        self.max_size = max_size
        self.url = url
        # The body kept so far: the first piece fed (or decoded) as it is,
        # so that a body that came in one piece is not copied (measured,
        # callgrind: an 8 KB page decoded, 15,400 instructions growing a
        # bytearray and copying it to bytes, 10,200 now); a bytearray from
        # the second piece on (not a list of pieces: a body sent in 2-byte
        # chunks would take 20 times its size).
        self._kept = b""
        self.size = 0  # its length
        self.too_large = False
        self._decompressor = None
        self._undecided = b""  # deflate: input kept until zlib vs raw is known
        self._fed = False  # whether any compressed byte arrived
        self._trailing_junk = False  # bytes after the last gzip member
        self.consumed = 0  # compressed bytes decoded so far (the bomb ratio)
        if self.coding in ("gzip", "x-gzip"):
            self._decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data):
        if self.coding is None:
            return self._keep(data)
        if data:
            self._fed = True
        if self.coding == "deflate" and self._decompressor is None:
            data = self._choose_deflate_format(data)
            if data is None:
                return True
        room = self.max_size - self.size
        try:
            decoded = self._decompressor.decompress(data, room + 1)
        except zlib.error as error:
            raise ContentDecodingError(f"cannot decode {self.coding} body: {error}",
                                       self.url) from None
        self.consumed += len(data) - len(self._decompressor.unconsumed_tail)
        rest = self._next_gzip_member()
        while rest and len(decoded) <= room:
            try:
                decoded += self._decompressor.decompress(rest, room + 1 - len(decoded))
            except zlib.error:  # not another member: trailing junk, ignored as browsers do
                self._trailing_junk = True
                break
            rest = self._next_gzip_member()
        return self._keep(decoded)

    def _next_gzip_member(self):
        """A gzip body may hold several members one after another (RFC 1952
        §2.2): when one ends with bytes left, start a decompressor for the
        next and return those bytes (None when there are none)."""
        finished = self._decompressor
        if self.coding == "deflate" or not (finished.eof and finished.unused_data):
            return None
        self._decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return finished.unused_data

    def _choose_deflate_format(self, data):
        # "deflate" means zlib-wrapped (RFC 9110 §8.4.1.2), but many servers
        # send raw DEFLATE: try zlib on the first two bytes, fall back to raw.
        data = self._undecided + data
        if len(data) < 2:
            self._undecided = data
            return None
        self._undecided = b""
        try:
            zlib.decompressobj().decompress(data[:2])
            self._decompressor = zlib.decompressobj()
        except zlib.error:
            self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        return data

    def is_bomb(self):
        """Whether a body cut at max_size decoded at more than
        MAX_COMPRESSION_RATIO to 1."""
        return (self.coding is not None and self.too_large
                and self.size > MAX_COMPRESSION_RATIO * self.consumed)

    @property
    def body(self):
        """The body kept so far (bytes)."""
        return bytes(self._kept)

    def _keep(self, data):
        room = self.max_size - self.size
        fits = len(data) <= room
        if not fits:
            data = data[:room]
            self.too_large = True
        if not self.size:
            self._kept = bytes(data)
        else:
            if type(self._kept) is bytes:
                self._kept = bytearray(self._kept)
            self._kept += data
        self.size += len(data)
        return fits

    def finish(self):
        """Decode what the decompressor still holds and return the body.
        ContentDecodingError if the compressed data stopped short of its end
        (a body cut off inside the compressed stream)."""
        if self._undecided:  # fewer than two bytes of deflate data in all
            raise ContentDecodingError(f"{self.coding} body of {len(self._undecided)} byte "
                                       "is not a compressed stream", self.url)
        if self._decompressor is not None and not self.too_large:
            try:
                self._keep(self._decompressor.flush())
            except zlib.error as error:
                raise ContentDecodingError(f"cannot decode {self.coding} body: {error}",
                                           self.url) from None
            if (self._fed and not self._decompressor.eof and not self.too_large
                    and not self._trailing_junk):
                raise ContentDecodingError(f"{self.coding} body ends before the end of "
                                           "its compressed data", self.url)
        return self.body


def _read_length_body(stream, length, decoder):
    """Feed exactly length bytes to decoder; returns "complete", "too_large"
    or "truncated"."""
    remaining = length
    while remaining:
        data = yield from stream.read(min(remaining, 65536))
        if not data:
            return "truncated"
        remaining -= len(data)
        if not decoder.feed(data):
            return "too_large"
    return "complete"


def _read_close_body(stream, decoder):
    while True:
        data = yield from stream.read()
        if not data:
            return "complete"
        if not decoder.feed(data):
            return "too_large"


def _read_chunked_body(stream, decoder, url):
    """Read the chunked transfer coding (RFC 9112 §7.1): chunk extensions
    are ignored, trailer fields read and discarded."""
    while True:
        try:
            line = yield from stream.readline(4096)
        except LimitOverrunError:
            raise ProtocolError("chunk-size line longer than 4096 bytes", url) from None
        except IncompleteReadError:
            return "truncated"
        invalid = _invalid_octet(line)
        if invalid:
            raise ProtocolError(f"malformed chunk size {bytes(line[:40])!r}: {invalid}", url)
        size_text = line.split(b";", 1)[0].strip(b" \t\r\n")
        if not size_text or size_text.strip(b"0123456789abcdefABCDEF"):
            raise ProtocolError(f"malformed chunk size {bytes(line[:40])!r}", url)
        size = int(size_text, 16)
        if size == 0:
            break
        outcome = yield from _read_length_body(stream, size, decoder)
        if outcome != "complete":
            return outcome
        try:
            end = yield from stream.readline(2)
        except IncompleteReadError:
            return "truncated"
        except LimitOverrunError:
            end = None
        if end not in (b"\r\n", b"\n"):
            raise ProtocolError("chunk data not followed by CRLF", url)
    try:
        yield from _read_field_block(  # the trailers, ignored
            stream, MAX_FIELD_SECTION_BYTES, url,
            f"trailer section larger than {MAX_FIELD_SECTION_BYTES} bytes", "trailer")
    except IncompleteReadError:
        pass  # the last chunk arrived; only the final CRLF is missing (as http.client)
    return "complete"


def read_response(stream, method, url, max_body_size=DEFAULT_MAX_BODY_SIZE, read_body=None):
    """Read one response from stream (a coroutine).

    read_body: None to read every body, or a function of the Response
    (head only) that says whether to read its body; a body not read is
    drained when short (DRAIN_LIMIT) and otherwise leaves the connection
    to be closed, and the Response has body_read False.

    Returns (Response, reusable): reusable says whether the connection may
    carry another request. Raises ProtocolError, BodyTooLarge (with the
    first max_body_size bytes of the body; DecompressionBomb for a bomb),
    TruncatedBody, ContentDecodingError (each with the partial response
    when the head had arrived), IncompleteReadError when the connection
    closes before a complete head, and OSError / TimeoutError from the
    socket."""
    received_before = stream.bytes_received - stream.buffered()
    version, status, reason, fields = yield from _read_head(stream, url)
    response = Response(url, status, reason, version, fields)
    decoder = None
    try:
        try:
            response.content_length = _content_length(fields, url)
        except ProtocolError:
            pass  # body_framing says whether that matters for this response
        framing, length, reusable = body_framing(method, status, fields, url)
        if framing != "none" and read_body is not None and not read_body(response):
            response.body_read = False
            reusable = reusable and (yield from _drain_body(stream, framing, length, url))
            framing = "none"
        # A response with no body (HEAD, 204, 304, a redirect with
        # Content-Length: 0) has nothing to decode, whatever its encoding says.
        coding = fields.get("content-encoding") if length != 0 and framing != "none" else None
        decoder = ContentDecoder(coding, max_body_size, url)
        outcome = yield from _read_body(stream, framing, length, decoder, url)
        response.body = decoder.finish() if outcome == "complete" else decoder.body
    except HTTPError as error:
        response.body = decoder.body if decoder is not None else b""
        response.truncated = True
        error.response = response
        raise
    finally:
        response.wire_bytes = stream.bytes_received - stream.buffered() - received_before
    if outcome != "complete":
        response.truncated = True
        raise _incomplete_body(outcome, response, decoder, framing, length, max_body_size)
    # Bytes after the body mean the framing is in doubt (e.g. a 304 sent
    # with a body): never send another request on this connection.
    reusable = (reusable and framing != "close" and wants_keep_alive(version, fields)
                and not stream.buffered() and not stream.at_eof())
    return response, reusable


def _read_body(stream, framing, length, decoder, url):
    """Read the body as its framing says, into decoder: "complete",
    "too_large" or "truncated"."""
    if framing == "none":
        return "complete"
    if framing == "length":
        return (yield from _read_length_body(stream, length, decoder))
    if framing == "chunked":
        return (yield from _read_chunked_body(stream, decoder, url))
    return (yield from _read_close_body(stream, decoder))


def _incomplete_body(outcome, response, decoder, framing, length, max_body_size):
    """The error for a body that did not end complete (outcome "too_large"
    or "truncated"), carrying the partial response."""
    url = response.url
    if outcome == "too_large" and decoder.is_bomb():
        return DecompressionBomb(f"decoded body exceeds the limit of {max_body_size} bytes "
                                 f"from {decoder.consumed} compressed bytes", url, response)
    if outcome == "too_large":
        declared = f"Content-Length {length}" if framing == "length" and length > max_body_size \
            else "body"
        return BodyTooLarge(f"{declared} exceeds the limit of {max_body_size} bytes",
                            url, response)
    return TruncatedBody(f"connection closed after {len(response.body)} of the body's bytes"
                         + (f" (Content-Length {length})" if framing == "length" else ""),
                         url, response)


def _drain_body(stream, framing, length, url):
    """Read and drop a body nobody wants when at most DRAIN_LIMIT bytes of
    it are left; True when the connection is then ready for the next
    response. A longer body, or one that runs until the server closes, is
    not read at all: closing costs less than receiving it."""
    discard = ContentDecoder(None, DRAIN_LIMIT, url)
    if framing == "length" and length <= DRAIN_LIMIT:
        outcome = yield from _read_length_body(stream, length, discard)
    elif framing == "chunked":
        try:
            outcome = yield from _read_chunked_body(stream, discard, url)
        except ProtocolError:  # a body we do not want is not worth an error
            return False
    else:
        return False
    return outcome == "complete"


# Writing a request -------------------------------------------------------------


def host_field(scheme, host, port):
    """The Host field value: brackets around IPv6 literals, the port only
    when it is not the scheme's default (RFC 9110 §7.2)."""
    if ":" in host:
        host = f"[{host}]"
    return host if port == DEFAULT_PORTS[scheme] else f"{host}:{port}"


def _check_field_value(name, value):
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"{name} must not contain CR, LF or NUL: {value!r}")
    try:
        value.encode("latin-1")  # field values are octets (RFC 9110 §5.5)
    except UnicodeEncodeError:
        raise ValueError(f"{name} must be ASCII (or latin-1): {value!r}") from None
    return value


class ConnectionPool:
    """Idle persistent connections, keyed by origin (scheme, host, port).

    At most max_per_origin idle Streams per origin and max_total in all;
    the oldest idle connection is closed to make room."""

    def __init__(self, max_per_origin=10, max_total=100):
        self.max_per_origin = max_per_origin
        self.max_total = max_total
        self._idle = {}  # origin -> [Stream], most recently used last
        self._order = collections.OrderedDict()  # Stream -> origin, oldest first

    def __len__(self):
        return len(self._order)

    def get(self, origin):
        """An idle Stream for origin that still looks alive, or None."""
        streams = self._idle.get(origin)
        while streams:
            stream = streams.pop()
            del self._order[stream]
            if _looks_alive(stream):
                return stream
            stream.close()
        return None

    def put(self, origin, stream):
        """Keep stream for reuse (or close it if the pool may not hold it)."""
        if self.max_per_origin <= 0 or self.max_total <= 0:
            stream.close()
            return
        streams = self._idle.setdefault(origin, [])
        if len(streams) >= self.max_per_origin:
            self._discard(streams[0])
        while len(self._order) >= self.max_total:
            self._discard(next(iter(self._order)))
        streams.append(stream)
        self._order[stream] = origin

    def _discard(self, stream):
        origin = self._order.pop(stream)
        self._idle[origin].remove(stream)
        stream.close()

    def close(self):
        """Close every idle connection."""
        for stream in self._order:
            stream.close()
        self._idle.clear()
        self._order.clear()


# Skip on first reading: deciding whether a pooled connection can be reused.
def _looks_alive(stream):
    """False when an idle connection has been closed by the server or has
    unexpected bytes waiting (peeked without consuming them)."""
    if stream.buffered() or stream.closed:
        return False
    sock = stream.sock
    try:
        # socket.socket.recv also peeks below TLS: a TLS record waiting may
        # be a harmless session ticket, so only EOF counts against TLS.
        data = socket.socket.recv(sock, 1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False
    return bool(data) and isinstance(sock, ssl.SSLSocket)


class _StaleConnection(Exception):
    """A reused connection failed before any byte of the response."""


def _connection_lost(error, retry, nothing_received, url):
    """The exception to raise when the connection ended before the response
    did: _StaleConnection when the request may be retried on a new one, a
    reset when the server sent nothing at all (as http.client's
    RemoteDisconnected), a ProtocolError for a head cut short."""
    if retry:
        return _StaleConnection()
    if not isinstance(error, IncompleteReadError):
        return error
    if nothing_received:
        return ConnectionResetError(errno.ECONNRESET, "the server closed the connection "
                                    "without sending a response")
    return ProtocolError(f"connection closed before a complete response head "
                         f"({len(error.partial)} bytes received)", url)


class Client:
    """An HTTP/1.1 client with a pool of persistent connections.

    Options: the keywords of OPTIONS whose component is "client" (timeout,
    connect_timeout, read_timeout, max_size, compression, user_agent,
    accept, cafile, verify, max_idle_per_origin, max_idle), with their
    defaults there.
    Times are seconds: timeout is the total deadline per fetch, connecting
    included, which a server trickling bytes cannot extend. verify=False
    is a loud opt-in: it is logged as a warning.

    Use ``response = yield from client.fetch(url)``; close() closes every
    socket. All errors are described at fetch()."""

    def __init__(self, **options):
        settings = take_options("client", options, "Client()")
        self.user_agent = _check_field_value("user agent", settings["user_agent"])
        self.accept = _check_field_value("accept", settings["accept"])
        self.connect_timeout = settings["connect_timeout"]
        self.read_timeout = settings["read_timeout"]
        self.timeout = settings["timeout"]
        self.max_size = settings["max_size"]
        self.compression = settings["compression"]
        self.verify = settings["verify"]
        self.cafile = settings["cafile"]
        self.pool = ConnectionPool(settings["max_idle_per_origin"], settings["max_idle"])
        self._active = set()  # Streams carrying a request right now
        self._ssl_context = None
        self._system_cas_loaded = False
        self.connections_opened = 0
        if not self.verify:
            logger.warning("TLS certificate verification is DISABLED: any server can "
                           "impersonate any host")

    def ssl_context(self):
        """The client's ssl.SSLContext, made on first use. With a cafile it
        trusts only the cafile's CAs until _trust_system_cas() adds the
        system's: see _connect."""
        if self._ssl_context is None:
            context = ssl.create_default_context(cafile=self.cafile)
            if not self.verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._ssl_context = context
            self._system_cas_loaded = not self.cafile  # create_default_context() loads them
        return self._ssl_context

    # Skip on first reading: the system CA store loaded only when needed.
    def _trust_system_cas(self, error):
        """True when error is a certificate that failed against the cafile's
        CAs alone: the system's CA store has just been added to the context,
        and the connection is worth one more try.

        A cafile means "also trust these CAs", yet loading the system store
        is the dearest step of TLS here (measured: 40 ms of CPU, OpenSSL 3
        parsing 144 PEM certificates, as much as 40 handshakes), and a
        crawl of a site under a private CA never needs it. So it is loaded
        when a certificate first fails without it."""
        if self._system_cas_loaded or not isinstance(error, ssl.SSLCertVerificationError):
            return False
        self._ssl_context.load_default_certs()
        self._system_cas_loaded = True
        return True

    def fetch(self, url, method="GET", headers=None, read_body=None, time_limit=None,
              max_size=None):
        """Fetch url (str) with method "GET" or "HEAD"; return a Response.

        headers: extra (name, value) pairs or a dict; read_body: see
        read_response (None reads every body); time_limit: this fetch's
        timeout instead of the client's; max_size: this fetch's largest
        body instead of the client's. Raises:
          ValueError            the URL is not http(s) or has no host
          socket.gaierror       the host name does not resolve
          OSError               connecting or sending failed
                                (ConnectionRefusedError, ...)
          ssl.SSLError          TLS failed (SSLCertVerificationError when the
                                certificate does not verify)
          TimeoutError          connect, idle read or total deadline passed
          ProtocolError, BodyTooLarge, TruncatedBody, ContentDecodingError
                                (HTTPError subclasses, with .response)
        A reused connection that the server had closed is retried once on a
        new connection, for GET and HEAD."""
        scheme, host, port, target = split_url(url)
        origin = (scheme, host, port)
        request = self._request_bytes(method, target, host_field(scheme, host, port), headers)
        started = get_event_loop().time()
        how = (method, read_body, self.max_size if max_size is None else max_size)
        try:
            with timeout(self.timeout if time_limit is None else time_limit):
                stream = self.pool.get(origin)
                if stream is not None:
                    try:
                        return (yield from self._send_and_read(stream, origin, request, how,
                                                               url, True, started))
                    except _StaleConnection:
                        logger.debug("%s: the server had closed the reused connection; "
                                     "retrying on a new one", url)
                stream = yield from self._connect(origin)
                return (yield from self._send_and_read(stream, origin, request, how, url,
                                                       False, started))
        except TimeoutError as error:
            raise TimeoutError(f"{url}: {error}") from None

    def _request_bytes(self, method, target, host, headers):
        coding = "gzip, deflate" if self.compression else "identity"
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}",
                 f"User-Agent: {self.user_agent}", f"Accept: {self.accept}",
                 f"Accept-Encoding: {coding}", "Connection: keep-alive"]
        for name, value in (headers.items() if isinstance(headers, dict) else headers or ()):
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"invalid field name {name!r}: it must be an RFC 9110 token")
            lines.append(f"{name}: {_check_field_value(name, value)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _connect(self, origin):
        scheme, host, port = origin
        context = self.ssl_context() if scheme == "https" else None
        # An idle read timeout no shorter than the whole fetch's deadline can
        # never fire first: leave it out, and save a timer on every read.
        read_timeout = self.read_timeout
        if self.timeout is not None and read_timeout is not None and read_timeout >= self.timeout:
            read_timeout = None
        for last_try in (False, True):
            try:
                stream = yield from open_connection(host, port, ssl_context=context,
                                                    connect_timeout=self.connect_timeout,
                                                    read_timeout=read_timeout)
                break
            except OSError as error:  # ssl.SSLError is one (ssl is looked at for https only)
                # No yield between the failed handshake and this check: "the
                # system store is not loaded yet" means it failed without it.
                if last_try or context is None or not self._trust_system_cas(error):
                    raise
                logger.debug("%s://%s: the --cafile CAs alone do not verify its certificate; "
                             "added the system's CA store", scheme, host_field(scheme, host, port))
        self.connections_opened += 1
        logger.debug("connected to %s://%s (%d connections so far)", scheme,
                     host_field(scheme, host, port), self.connections_opened)
        return stream

    def _send_and_read(self, stream, origin, request, how, url, reused, started):
        method, read_body, max_size = how
        self._active.add(stream)
        reusable = False
        received_before = stream.bytes_received
        try:
            try:
                yield from stream.write(request)
                response, reusable = yield from read_response(stream, method, url,
                                                              max_size, read_body)
            except (ConnectionResetError, BrokenPipeError, IncompleteReadError) as error:
                nothing_received = stream.bytes_received == received_before
                retry = reused and nothing_received and method in IDEMPOTENT_METHODS
                lost = _connection_lost(error, retry, nothing_received, url)
                if lost is error:
                    raise
                raise lost from None
            response.elapsed = get_event_loop().time() - started
            return response
        finally:
            self._active.discard(stream)
            if reusable and not stream.closed:
                self.pool.put(origin, stream)
            else:
                stream.close()

    def close(self):
        """Close every connection, idle or in use."""
        self.pool.close()
        for stream in list(self._active):
            stream.close()
        self._active.clear()


def fetch(url, method="GET", **options):
    """Fetch one URL with a one-off Client (options as for Client); a
    coroutine returning a Response. The connection is closed afterwards."""
    client = Client(**options)
    try:
        return (yield from client.fetch(url, method))
    finally:
        client.close()


# ---------------------------------------------------------------------------
# 7. Links
# ---------------------------------------------------------------------------
#
# The links of a page are what a browser would request from it, as the
# HTML Standard's tokenizer reads the markup: the href of <a> and <area>
# and the src of <iframe> (and of <frame> in a frameset) are links to
# pages; <img>, <script>, <link rel=stylesheet>, media and the other tags
# of RESOURCE_ATTRIBUTES name resources, which are checked but not crawled
# (only HTML pages and stylesheets are parsed for more links). scan_links()
# in section 11 is the tokenizer (one extractor, fast); this section says
# what a tag contributes and decodes attribute values and srcset.

HTML_TYPES = ("text/html", "application/xhtml+xml")
CSS_TYPE = "text/css"
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+\-]+)""", re.I)


def html_charset(body, declared):
    """The charset to decode an HTML body with: a UTF-8 byte order mark,
    else the Content-Type charset (declared), else a <meta charset> or
    http-equiv in the first 1024 bytes, else "utf-8". Unknown names fall
    back to "utf-8"."""
    if body.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    charset = declared
    if not charset:
        match = _META_CHARSET.search(body, 0, 1024)
        charset = match.group(1).decode("ascii").lower() if match else "utf-8"
    try:
        codec = codecs.lookup(charset)
    except (LookupError, ValueError):
        return "utf-8"
    # Names like "base64" or "idna" are codecs, but not encodings of a page.
    if not getattr(codec, "_is_text_encoding", True) or codec.name in ("idna", "punycode"):
        return "utf-8"
    return charset


# What each tag names, as {tag: ((attribute, via), ...)}: via is how the
# record of the URL says it was found ("link" for a page, "tag attribute"
# for a resource). <link> counts only with a rel in LINK_RESOURCE_RELS,
# <input> only with type=image, <frame> only in a frameset (the standard
# ignores it elsewhere), and rel=nofollow drops an <a> or <area>.
RESOURCE_ATTRIBUTES = {
    "a": (("href", "link"),), "area": (("href", "link"),),
    "iframe": (("src", "link"),), "frame": (("src", "link"),),
    "img": (("src", "img src"), ("srcset", "img srcset")),
    "source": (("src", "source src"), ("srcset", "source srcset")),
    "script": (("src", "script src"),), "link": (("href", "link href"),),
    "video": (("src", "video src"), ("poster", "video poster")),
    "audio": (("src", "audio src"),), "track": (("src", "track src"),),
    "embed": (("src", "embed src"),), "object": (("data", "object data"),),
    "input": (("src", "input src"),),
}
LINK_RESOURCE_RELS = frozenset((
    "stylesheet", "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "manifest",
    "preload", "modulepreload", "prefetch"))


_NOFOLLOW = frozenset(("nofollow", "none"))  # robots meta values: "none" is noindex, nofollow
_ASCII_WHITESPACE_SEPARATED = re.compile(r"[^\t\n\f\r ]+")


def split_ascii_whitespace(value):
    """The HTML standard's "split a string on ASCII whitespace" (for rel
    and srcset descriptors): str.split() also splits on other Unicode
    whitespace, such as U+00A0 and U+001C, which are part of a token."""
    return _ASCII_WHITESPACE_SEPARATED.findall(value)


def link_from_tag(found, tag, attrs, first):
    """Note what a start tag contributes to found (a _FoundLinks): tag is
    its lower-case name, attrs its attributes, first(attrs, name) the
    decoded value of the first attribute called name (None if it has no
    value or is absent)."""
    if tag == "image":
        tag = "img"  # the tree builder's rule for <image> in HTML content
    named = RESOURCE_ATTRIBUTES.get(tag)
    if named is not None:
        if tag == "a" or tag == "area":
            rel = first(attrs, "rel")
            if rel is not None and "nofollow" in split_ascii_whitespace(rel.lower()):
                return
        elif tag == "link":
            rel = first(attrs, "rel")
            if rel is None or LINK_RESOURCE_RELS.isdisjoint(split_ascii_whitespace(rel.lower())):
                return
        elif tag == "input":
            # An enumerated attribute: compared as it is, not trimmed.
            if (first(attrs, "type") or "").lower() != "image":
                return
        elif tag == "frame" and not found.frameset:
            return
        for name, via in named:
            value = first(attrs, name)
            if value is not None:
                if name == "srcset":
                    found.links.extend((url, via) for url in srcset_urls(value))
                else:
                    found.links.append((value, via))
    elif tag == "base":
        if found.base is None:
            found.base = first(attrs, "href")
    elif tag == "meta":
        name = (first(attrs, "name") or "").lower()
        if name == "robots":
            content = (first(attrs, "content") or "").lower()
            if not _NOFOLLOW.isdisjoint(split_ascii_whitespace(content.replace(",", " "))):
                found.nofollow = True
    elif tag == "frameset":
        found.frameset = True


def first_attribute(attrs, name):
    """For [(lower-case name, decoded value)]. The HTML standard keeps the
    first of repeated attributes."""
    for key, value in attrs:
        if key == name:
            return value
    return None


# Character references in attribute values ------------------------------------
#
# Written by hand because html.unescape() (and html.parser) differ from the
# standard in attribute values on every supported Python: a named reference
# without ";" (one of the 106 legacy names such as &amp, &lt, &para, &reg) is
# left as text when an ASCII alphanumeric or "=" follows ("/p?id=7&para=2"
# is what a browser requests), and numeric references to controls are kept
# (&#x1; is U+0001), not dropped. The table of names is html.entities.html5.

_CHARACTER_REFERENCE = re.compile(r"&(?:#[xX]([0-9a-fA-F]+);?|#([0-9]+);?|([a-zA-Z0-9]+;?))")
_NAMED_REFERENCES = html.entities.html5
_LONGEST_LEGACY_NAME = max(len(name) for name in _NAMED_REFERENCES if not name.endswith(";"))
# The standard's replacements for numeric references to 0x80-0x9F: the
# windows-1252 characters, except the five bytes that encoding leaves out.
_NUMERIC_REPLACEMENTS = {n: bytes((n,)).decode("cp1252") for n in range(0x80, 0xA0)
                         if n not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}


def _numeric_reference(number):
    if number == 0 or number > 0x10FFFF or 0xD800 <= number <= 0xDFFF:
        return "\ufffd"
    return _NUMERIC_REPLACEMENTS.get(number) or chr(number)


def _code_point_number(digits, base):
    """int(digits, base) for the digits of a character reference or
    escape, but 0x110000 (no code point) for any number past 0x10FFFF:
    the text may hold thousands of digits, more than int() converts
    (ValueError past 4,300 decimal digits) or needs to."""
    digits = digits.lstrip("0")
    return int(digits or "0", base) if len(digits) <= 7 else 0x110000


def _character_reference(match):
    hexadecimal, decimal, name = match.groups()
    if hexadecimal is not None:
        return _numeric_reference(_code_point_number(hexadecimal, 16))
    if decimal is not None:
        return _numeric_reference(_code_point_number(decimal, 10))
    if name[-1] == ";" and name in _NAMED_REFERENCES:
        return _NAMED_REFERENCES[name]
    # The longest legacy name (one without ";") that the text starts with.
    run = name.rstrip(";")
    for length in range(min(len(run), _LONGEST_LEGACY_NAME), 1, -1):
        if run[:length] in _NAMED_REFERENCES:
            break
    else:
        return match.group()  # no such name: the text stays
    following = name[length:length + 1] or match.string[match.end():match.end() + 1]
    if following == "=" or following.isascii() and following.isalnum():
        return match.group()  # the standard's rule for attribute values
    return _NAMED_REFERENCES[run[:length]] + name[length:]


def unescape_attribute(value):
    """An attribute value as the HTML standard's tokenizer decodes it:
    character references (in the attribute-value rules) and NUL as U+FFFD."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if "&" not in value:
        return value
    return _CHARACTER_REFERENCE.sub(_character_reference, value)


# srcset ----------------------------------------------------------------------

_SRCSET_URL = _compile_on_first_use(r"[\t\n\f\r ,]*([^\t\n\f\r ]*)")
# A run of characters per repetition, not one: the regex engine keeps a
# few hundred bytes per repetition while it matches (170 bytes a character
# of a long descriptor list).
_SRCSET_DESCRIPTORS = _compile_on_first_use(r"((?:[^,(]+|\([^)]*\)?)*),?")
_SRCSET_DESCRIPTOR = _compile_on_first_use(
    r"(?:([0-9]+)([wh])|((?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)x)\Z")


def srcset_urls(value):
    """The URLs of the image candidates of a srcset value, by the HTML
    standard's "parse a srcset attribute": a URL is the run of characters
    up to whitespace (commas inside it belong to it, trailing commas do
    not), its descriptors end at a comma outside parentheses, and a
    candidate with invalid descriptors is dropped."""
    urls, i = [], 0
    while True:
        match = _SRCSET_URL.match(value, i)
        url, i = match.group(1), match.end()
        if not url:
            return urls
        if url[-1] == ",":
            urls.append(url.rstrip(","))
            continue
        match = _SRCSET_DESCRIPTORS.match(value, i)
        i = match.end()
        if _valid_descriptors(split_ascii_whitespace(match.group(1))):
            urls.append(url)


def _valid_descriptors(descriptors):
    seen = ""  # the kinds of descriptor seen: "w", "h", "x"
    for descriptor in descriptors:
        match = _SRCSET_DESCRIPTOR.match(descriptor)
        if not match:
            return False
        number, kind, density = match.groups()
        kind = kind or "x"
        if kind in seen or (kind != "h" and ("w" in seen or "x" in seen)) \
                or (kind == "x" and "h" in seen) or (number is not None and not number.strip("0")):
            return False
        seen += kind
    return "h" not in seen or "w" in seen


# Stylesheets -----------------------------------------------------------------
#
# The URLs of a stylesheet: url(...) and @import "..." as CSS Syntax reads
# them (written by hand: the standard library has no CSS tokenizer). Only
# the tokens that can hold or hide a URL are matched: comments, strings
# and names (idents, at-keywords, hashes, functions), a name's escapes
# decoded before it is compared ("\75rl(" is "url("). A string that a
# newline ends is a "bad string" and names nothing; the end of the text
# closes a string, a url( and an @import. Few crawls meet a stylesheet:
# these patterns are compiled on first use (measured: 16 ms, more than half
# of compiling all of this file's regular expressions, on Python 3.11).

_CSS_NEWLINE = _compile_on_first_use(r"\r\n?|\f")  # preprocessing: each is one newline
# An escape: up to six hex digits (a maximal run, so that the engine has
# one way to read it) and one optional space, or any character but newline.
_CSS_ESCAPED = r"\\(?:[0-9a-fA-F]{6}[\t\n ]?|[0-9a-fA-F]{1,5}(?![0-9a-fA-F])[\t\n ]?|[^\n0-9a-fA-F])"
_CSS_TOKEN = _compile_on_first_use(r"""
      /\*[\s\S]*?(?:\*/|\Z)                                  # a comment
    | (["'])((?:[^"'\\\n]|\\[\s\S]|\\\Z|(?!\1)["'])*)(\1?)   # a string (bad if unclosed)
    | ([@#]?)((?:[-0-9A-Za-z_\x80-\U0010ffff]|%s)+)(\(?)      # a name, maybe a function's
    """ % _CSS_ESCAPED, re.X)
# After "url(": a quote (then "url(" is a function whose argument is a
# string token), or the rest of a url token, or what a bad url swallows.
_CSS_URL_REST = _compile_on_first_use(r"""[\t\n ]*(?:
      (?=(["']))                                             # url("...")
    | ((?:[^"'()\\\t\n \x01-\x08\x0b\x0e-\x1f\x7f]|%s)*)[\t\n ]*(?:\)|\Z)   # a url token
    | (?:[^)\\]|\\[\s\S])*\)?                                # a bad url
    )""" % _CSS_ESCAPED, re.X)
_CSS_CLOSE = _compile_on_first_use(r"[\t\n ]*(?:\)|\Z)")
# What cannot hold a URL, stepped over in C for speed (measured: css_links
# seven times as fast): spaces and punctuation, and names that are not
# "url(" or "@import" and have no escapes (a name is matched whole, atomic
# by a lookahead and a backreference, so that an escape after it stops the
# skip at the name's start).
_CSS_SKIP = _compile_on_first_use(r"""(?:
      [^"'/\\@\#\-0-9A-Za-z_\x80-\U0010ffff]+
    | /(?!\*)
    | [@\#](?![-0-9A-Za-z_\x80-\U0010ffff\\])
    | (?:\#|@(?![iI][mM][pP][oO][rR][tT](?![-0-9A-Za-z_\x80-\U0010ffff\\]))|(?![uU][rR][lL]\())
      (?=([-0-9A-Za-z_\x80-\U0010ffff]+))\1(?!\\)
    )*""", re.X)
_CSS_ESCAPE = _compile_on_first_use(r"\\(?:([0-9a-fA-F]{1,6})[\t\n ]?|\n|\Z|([\s\S]))")


def _css_unescape(match):
    """CSS's "consume an escaped code point": a hex escape is that code
    point (U+0080 is U+0080: no windows-1252 table, unlike HTML), except
    0, surrogates and numbers past 0x10FFFF, which are U+FFFD."""
    hexadecimal, character = match.groups()
    if hexadecimal is not None:
        number = int(hexadecimal, 16)
        if number == 0 or 0xD800 <= number <= 0xDFFF or number > 0x10FFFF:
            return "\ufffd"
        return chr(number)
    return character or ""  # an escaped newline continues a string


def _css_value(text):
    """A string, name or URL of CSS, escapes decoded."""
    return _CSS_ESCAPE.sub(_css_unescape, text) if "\\" in text else text


def css_links(text):
    """The URLs of a stylesheet (str), as [(raw URL, via)] in order."""
    if "\r" in text or "\f" in text:
        text = _CSS_NEWLINE.sub("\n", text)
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    found = []
    importing = False  # after "@import" and nothing but spaces and comments
    url_via = None  # after "url(" and before its string: how the URL was found
    position = 0
    skip, token, end = _CSS_SKIP.match, _CSS_TOKEN.match, len(text)
    while True:
        gap = position
        start = skip(text, position).end()
        if start == end:
            return found
        match = token(text, start)
        if match is None:  # a "\" that escapes nothing: a delimiter
            position, importing = start + 1, False
            continue
        position = match.end()
        quote, string, closed, prefix, name, function = match.groups()
        if importing and start > gap and text[gap:start].strip(" \t\n"):
            importing = False
        if quote:
            whole = closed or position == end  # not ended by a newline
            if url_via:
                if whole and _CSS_CLOSE.match(text, position):
                    found.append((_css_value(string), url_via))
            elif importing and whole:
                found.append((_css_value(string), "css @import"))
            importing, url_via = False, None
        elif name:
            value = _css_value(name).lower()
            if prefix == "@":
                importing = value == "import" and not function
                continue
            if function and not prefix and value == "url":
                via = "css @import" if importing else "css url"
                rest = _CSS_URL_REST.match(text, position)
                position = rest.end()
                if rest.group(1):
                    url_via = via
                    continue
                if rest.group(2) is not None:
                    found.append((_css_value(rest.group(2)), via))
            importing = False


def document_base(found, url):
    """The URL a page's links resolve against: its first <base href> (found
    by scan_links), or the page's own URL when there is none or it is not
    valid."""
    if found.base is None:
        return url
    try:
        return normalize_url(found.base, url) or url
    except ValueError:
        return url


def invalid_link_url(raw):
    """The URL of the record of a link that cannot be valid: as written,
    without the whitespace that the HTML standard strips from a URL."""
    return raw.strip(LINK_WHITESPACE)


def find_links(text, url, media_type="text/html", found=None):
    """Find the links in the text (str) of the HTML page or stylesheet
    (media_type CSS_TYPE) at url and return (links, invalid): links is a
    dict {normalized URL: via} of the distinct links in document order
    (via as RESOURCE_ATTRIBUTES names them, the first way wins), resolved
    against the first <base href> if any; invalid is a list of (raw link,
    reason, via) for the distinct links that cannot be valid URLs (one
    invalid_link_url() each, the first way wins). A page with <meta
    name=robots content=nofollow> (or none) has no links. found: what
    scan_links() found in the text, when the caller has it already."""
    if media_type == CSS_TYPE:
        raws, base = css_links(text), url
    else:
        found = found or scan_links(text)
        if found.nofollow:
            return {}, []
        raws, base = found.links, document_base(found, url)
    links, invalid = {}, {}
    resolve = LinkResolver(base).resolve
    # A page repeats its links (on the Apache manual, half of them):
    # each (raw, via) is resolved once (measured: a tenth less time here).
    for raw, via in dict.fromkeys(raws):
        link = resolve(raw)
        if type(link) is str:
            if link not in links:
                links[link] = via
        elif link is not None:
            invalid.setdefault(invalid_link_url(raw), (raw, str(link), via))
    return links, list(invalid.values())


def extract_links(text, url):
    """find_links() for an HTML page, as (links, invalid): the list of
    distinct normalized URLs and the list of (raw link, reason)."""
    links, invalid = find_links(text, url)
    return list(links), [(raw, reason) for raw, reason, _ in invalid]


# Sitemaps --------------------------------------------------------------------
#
# The URLs a site lists for crawlers (sitemaps.org): a <urlset> of <url><loc>
# entries, or a <sitemapindex> of <sitemap><loc> entries naming more
# sitemaps; gzip-compressed or not. The protocol's limits: 50,000 URLs and
# 50 MB (uncompressed) per file.
#
# Parsed with expat (pyexpat, what xml.etree runs on) rather than through
# ElementTree: expat does not fetch external entities but expands internal
# ones, so a DOCTYPE with nested ENTITY declarations ("billion laughs")
# would blow up. A DOCTYPE is refused as expat reports it, before any
# declaration in it is read, whatever the document's encoding (a search of
# the bytes for "<!DOCTYPE" would miss a UTF-16 one); and the handlers
# keep only the <loc> text, where ElementTree would build a tree of 50 MB.

SITEMAP_NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"
SITEMAP_MAX_URLS = 50000
SITEMAP_MAX_BYTES = 50 * 1024 * 1024  # 50 MiB: the protocol's "50MB", read generously


class SitemapError(ValueError):
    """A document that is no valid sitemap; the message says why."""


def parse_sitemap(data):
    """(is_index, locs, more) of a sitemap (bytes, gzip-compressed or not):
    whether it is a sitemap index, the text of its first SITEMAP_MAX_URLS
    <loc> entries in order, and how many more it has. SitemapError for a
    document that is not one, or over SITEMAP_MAX_BYTES uncompressed."""
    if data[:2] == b"\x1f\x8b":
        data = _gunzip_sitemap(data)
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True
    names = {}  # the names of the root, its entries and their <loc>, once known
    open_names, text, locs, more = [], [], [], 0

    def start(name, attributes):
        if not open_names:
            namespace, _, local = name.rpartition(" ")
            if local not in ("urlset", "sitemapindex") or namespace not in ("", SITEMAP_NAMESPACE):
                raise SitemapError(f"not a sitemap: the document is a <{local}>")
            prefix = name[:len(name) - len(local)]
            names["entry"] = prefix + ("url" if local == "urlset" else "sitemap")
            names["loc"] = prefix + "loc"
        open_names.append(name)
        text.clear()

    def end(name):
        nonlocal more
        if len(open_names) == 3 and name == names["loc"] and open_names[1] == names["entry"]:
            if len(locs) < SITEMAP_MAX_URLS:
                locs.append("".join(text).strip())
            else:
                more += 1
        open_names.pop()

    def refuse(*args):
        raise SitemapError("not a sitemap: it has a DOCTYPE (refused: entity expansion)")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text.append
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as error:
        raise SitemapError(f"not well-formed XML: {error}") from None
    return names["entry"].endswith("sitemap"), locs, more


def _gunzip_sitemap(data):
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip only
    try:
        data = decompressor.decompress(data, SITEMAP_MAX_BYTES + 1)
    except zlib.error as error:
        raise SitemapError(f"not valid gzip: {error}") from None
    if len(data) > SITEMAP_MAX_BYTES:
        raise SitemapError(f"larger than {SITEMAP_MAX_BYTES} bytes uncompressed "
                           "(the sitemaps.org limit)")
    if not decompressor.eof:
        raise SitemapError("not valid gzip: it ends early")
    return data


# ---------------------------------------------------------------------------
# 8. robots.txt
# ---------------------------------------------------------------------------
#
# The robots exclusion protocol (RFC 9309). urllib.robotparser misses
# several of its rules (no * or $ wildcards, first match instead of longest,
# a UTF-8 BOM breaks the first group, fractional Crawl-delay is dropped), so
# here is a small matcher of our own.


MAX_CRAWL_DELAY = 60.0  # seconds: a larger Crawl-delay is honoured as this


class RobotsRules:
    """The rules of one robots.txt that apply to one product token.

    can_fetch(target) takes a normalized path and query ("/a?b=1"). The
    longest matching pattern (in octets) wins; Allow wins a tie; "*" matches
    any run of characters and a final "$" anchors the end (RFC 9309
    §2.2.2-2.2.3). crawl_delay is seconds (float) or None; sitemaps, the
    values of the file's Sitemap: lines (for every user agent), in order."""

    def __init__(self, rules=(), crawl_delay=None, reason=None, error_kind="robots", sitemaps=()):
        self.rules = [(_robots_pattern(path), len(path), allow) for allow, path in rules]
        self.crawl_delay = crawl_delay
        self.sitemaps = list(sitemaps)
        self.reason = reason  # why everything is disallowed, if it is
        self.error_kind = error_kind  # what a blocked URL's record says

    @classmethod
    def allow_all(cls):
        return cls()

    @classmethod
    def disallow_all(cls, reason, error_kind="robots"):
        """Nothing may be fetched: error_kind "robots" when the server said
        so (a 5xx answer), else the kind of the error that made robots.txt
        unreachable ("connect", "dns", "tls", ...), which is a failure."""
        return cls([(False, "/")], reason=reason, error_kind=error_kind)

    @classmethod
    def parse(cls, text, product_token):
        """Parse robots.txt text (str) and keep the groups for
        product_token (matched case-insensitively), else the "*" groups."""
        groups = _robots_groups(text)
        token = product_token.lower()
        chosen = [group for agents, group in groups if token in agents]
        if not chosen:
            chosen = [group for agents, group in groups if "*" in agents]
        rules, delays = [], []
        for group in chosen:
            for key, value in group:
                if key in ("allow", "disallow") and value:
                    rules.append((key == "allow", normalize_component(value, QUERY_SAFE + "*$")))
                elif key == "crawl-delay":
                    try:
                        delay = float(value)
                    except ValueError:
                        continue
                    # Not "inf", "nan" or negative; a numeral too large for
                    # a float (inf too) is capped like any large delay.
                    if 0 <= delay < float("inf") or delay > 0 and value[:1].isdigit():
                        delays.append(min(delay, MAX_CRAWL_DELAY))
        return cls(rules, max(delays) if delays else None, sitemaps=_robots_sitemaps(text))

    def summary(self):
        """A short description for the log."""
        if self.reason:
            return self.reason
        delay = f", Crawl-delay {self.crawl_delay:g} s" if self.crawl_delay else ""
        return f"{len(self.rules)} rules{delay}"

    def can_fetch(self, target):
        if target == "/robots.txt":
            return True  # implicitly allowed (RFC 9309 §2.2.2)
        best_length, allowed = -1, True
        for pattern, length, allow in self.rules:
            longer = length > best_length or (length == best_length and allow)
            if longer and pattern.match(target):
                best_length, allowed = length, allow
        return allowed


def _robots_groups(text):
    """[(set of lower-case user agents, [(key, value)])] in file order."""
    groups = []
    agents, rules = None, None
    for line in text.lstrip("\ufeff").splitlines():
        line = line.split("#", 1)[0].strip()
        key, colon, value = line.partition(":")
        if not colon:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "user-agent":
            if agents is None or rules:
                agents, rules = set(), []
                groups.append((agents, rules))
            agents.add(value.split("/")[0].strip().lower())
        elif agents is not None and key in ("allow", "disallow", "crawl-delay"):
            rules.append((key, value))  # other records (Sitemap, ...) do not end a group
    return groups


def _robots_sitemaps(text):
    """The values of the Sitemap: lines, which belong to no group (RFC 9309
    §2.2.4; sitemaps.org)."""
    sitemaps = []
    for line in text.lstrip("\ufeff").splitlines():
        key, colon, value = line.split("#", 1)[0].partition(":")
        if colon and key.strip().lower() == "sitemap" and value.strip():
            sitemaps.append(value.strip())
    return sitemaps


def _robots_pattern(path):
    anchored = path.endswith("$")
    if anchored:
        path = path[:-1]
    regex = ".*?".join(re.escape(part) for part in path.split("*"))
    return re.compile(regex + ("$" if anchored else ""), re.S)


def product_token(user_agent):
    """The product token robots.txt groups are matched on: the user agent's
    first word before "/" ("crawl.py" for "crawl.py/1.0 (+python)")."""
    return (user_agent.split() or ["*"])[0].split("/")[0]


# ---------------------------------------------------------------------------
# 9. The crawler
# ---------------------------------------------------------------------------
#
# The frontier is a Queue of URLs. max_tasks worker coroutines take URLs
# from it, fetch them through one Client and put the new links they find
# back on it; the seen set makes sure each URL is queued once. The crawl is
# over when the queue is joined: every URL put on it has been marked done.
# With --max-depth it is joined once per depth, and the URLs found one link
# deeper are put on it only then (breadth first, as wget -r).
# Whatever happens to a URL, it ends with exactly one Record. The seen set
# and the records are one RecordStore, which also keeps what the crawler
# knows of how a waiting URL was reached (a worker takes it as a
# FrontierItem).

class FrontierItem(collections.namedtuple(
        "FrontierItem", "url redirects_left depth referrer chain via")):
    """A URL taken from the frontier: url; redirects_left, how many more
    redirects may be followed from it; depth, links from a root; referrer,
    the page that linked to it or the URL that redirected to it (None for
    a root); chain, the URLs of the redirects that led to it; via, how it
    was found (RECORD_FIELDS)."""

    __slots__ = ()


REDIRECT_STATUSES = (301, 302, 303, 307, 308)
RETRY_STATUSES = (429, 503)
# The kinds of the trap defences (ERROR_KINDS, not failures): the summary
# counts them apart, to show that the crawl was cut and where.
TRAP_KINDS = ("url_length", "path_segments", "path_repeats", "soft_404")
MAX_REFERRERS = 100  # linking pages kept per failed URL (the count has them all)

# The bodies the crawler reads: pages and stylesheets, for their links. Any
# other response is read up to the end of its head (status, type, length).
BODY_TYPES = HTML_TYPES + (CSS_TYPE,)
# Off-site links are checked at most this many at a time per host.
EXTERNAL_PER_HOST = 2
# Sitemap indexes are read this many deep (sitemaps.org allows one; some
# sites nest them); the sitemaps a deeper index lists are ignored.
MAX_SITEMAP_NESTING = 2


def wants_body(response):
    """The crawler's read_body: only a 200 page or stylesheet is read."""
    return response.status == 200 and response.content_type in BODY_TYPES


def no_body(response):
    """The read_body of a GET that stops after the head."""
    return False


def _status_ok(response):
    """The read_body of a sitemap: every 200 response is read."""
    return response.status == 200



class Record:
    """What happened to one URL: the fields of RECORD_FIELDS (their
    meanings are there), set as the URL goes through the crawler."""

    __slots__ = tuple(name for name in RECORD_FIELDS if name not in COMPUTED_FIELDS)

    def __init__(self, url, depth=0, referrer=None, via=None):
        self.url = url
        self.status = None
        self.reason = None
        self.content_type = None
        self.charset = None
        self.size = 0
        self.content_length = None
        self.links = 0
        self.new_links = 0
        self.redirect = None
        self.error = None
        self.error_kind = None
        self.tries = 0
        self.elapsed = 0.0
        self.depth = depth
        self.referrer = referrer
        self.via = via or ("link" if referrer else "root")
        self.linked_from = None
        self.referrers = None

    def __repr__(self):
        kind = f" {self.error_kind}" if self.error_kind else ""
        return f"<Record {self.url} {self.status}{kind}>"

    def as_dict(self):
        return {name: getattr(self, name) for name in RECORD_FIELDS}

    @property
    def failed(self):
        """True for an error (other than a URL not fetched by choice) or a
        4xx/5xx status: what makes the exit status 1."""
        if self.error_kind is not None:
            return ERROR_KINDS[self.error_kind].failure
        return self.status is not None and self.status >= 400

    @property
    def is_page(self):
        """An HTML page fetched with status 200 (all of it, or cut short)."""
        return (self.status == 200 and self.content_type in HTML_TYPES
                and (self.error is None or self.error_kind == "cut_short"))


# Skip on first reading: memory per URL (measured on a 100,000-page site,
# the benchmark's S6: peak RSS 702 bytes per URL with a Record object, a
# FrontierItem and a seen entry each, 285 to 295 with this).
class RecordStore(collections.abc.Mapping):
    """The records of a crawl (crawler.records): a mapping url -> Record
    of the URLs finished, in finishing order, kept as packed rows.

    A crawl of a large site holds hundreds of thousands of URLs, and a
    Record object with its numbers costs about 260 bytes. Here each URL the
    crawler has seen is a row: a fixed-size slot of one bytearray holding
    its numbers (machine integers and a double, packed with struct) and,
    for the strings many URLs share (a content type, "OK", an error
    message, how it was found), an index into one table of distinct
    strings; beside it the referrer, a reference to the linking page's
    URL, and the fields most records leave null (redirect, linked_from,
    referrers) in a dict by row. Where a packed field cannot hold a value
    (null, a number out of range, a string when the table is full) it holds
    its marker, and the value, unless null, is in a dict of odd values.

    A row is added when the crawler first sees the URL (add: its depth,
    referrer, via and how many pages link to it) and filled in when the
    URL finishes (finish). Reading gives a new Record each time: a
    snapshot of the row, which changing does not change the store (the
    crawler updates a failed URL's linked_from and referrers with
    set_field)."""

    # The packed fields, with their struct codes: unsigned integers of 2
    # or 4 bytes, and a double.
    PACKED = (("status", "H"), ("size", "I"), ("content_length", "I"), ("links", "H"),
              ("new_links", "H"), ("tries", "H"), ("elapsed", "d"), ("depth", "H"),
              ("reason", "H"), ("content_type", "H"), ("charset", "H"), ("error", "H"),
              ("error_kind", "H"), ("via", "H"))
    TEXTS = ("reason", "content_type", "charset", "error", "error_kind", "via")
    SPARSE = ("redirect", "linked_from", "referrers")
    # The two other fields: the url (the key) and the referrer (a list).

    def __init__(self):
        self._rows = {}  # URL -> row, for every URL seen, in the order seen
        # row(url): its row, or None if it was never seen (the dict's own
        # method: this runs for every link found).
        self.row = self._rows.get
        self._finished = []  # the URLs finished, in finishing order
        self._done = bytearray()  # row -> 1 once finished
        self._links_in = array.array("I")  # row -> how many pages link to it
        self.seen = _LinkCounts(self._rows, self._links_in)
        self._referrer = []
        self._format = struct.Struct("<" + "".join(code for _, code in self.PACKED))
        self._packed = bytearray()  # the rows, self._format.size bytes each
        self._markers = [_marker(code) for _, code in self.PACKED]
        # A record whose packed fields are all plain (no null, no odd value)
        # is read with one attrgetter call and packed with one struct call
        # (measured: 3.3 us a record to pack, 2.8 to read; about 9 field by field).
        self._names = [name for name, _ in self.PACKED]
        self._fields_of = operator.attrgetter(*self._names)
        self._texts_at = [i for i, name in enumerate(self._names) if name in self.TEXTS]
        self._plain_types = tuple(type(marker) for marker in self._markers)
        self._marker_set = set(self._markers)
        # name -> (its struct, its offset in a row, its marker, whether it is a
        # text): all _put and _get need, in one look-up (measured, callgrind:
        # a page's rows, 3 added, 1 read and 1 finished, 91,000 instructions
        # when they scanned TEXTS and SPARSE for the name, 76,000 now).
        self._field = {}
        offset = 0
        for (name, code), marker in zip(self.PACKED, self._markers):
            field = struct.Struct("<" + code)
            self._field[name] = (field, offset, marker, name in self.TEXTS)
            offset += field.size
        self._blank_row = self._format.pack(*self._markers)  # a row of markers: all null
        self._odd = {name: {} for name, _ in self.PACKED}  # name -> {row: value}
        self._sparse = {name: {} for name in self.SPARSE}  # name -> {row: value}
        self._strings = [None]  # the distinct strings of the text fields (0: null)
        self._string_index = {None: 0}

    # The mapping: the records of the URLs finished.

    def __len__(self):
        return len(self._finished)

    def __iter__(self):
        return iter(self._finished)

    def __contains__(self, url):
        row = self._rows.get(url)
        return row is not None and self._done[row] == 1

    def __getitem__(self, url):
        row = self._rows.get(url)
        if row is None or not self._done[row]:
            raise KeyError(url)
        record = Record.__new__(Record)  # every field is set below
        record.url, record.referrer = url, self._referrer[row]
        values = list(self._format.unpack_from(self._packed, row * self._format.size))
        if self._marker_set.isdisjoint(values):  # all plain
            for i in self._texts_at:
                values[i] = self._strings[values[i]]
        else:  # a null or an odd value somewhere: field by field
            values = [self._get(row, name) for name in self._names]
        for name, value in zip(self._names, values):
            setattr(record, name, value)
        for name, values in self._sparse.items():
            value = values.get(row)
            setattr(record, name, list(value) if type(value) is list else value)  # a snapshot
        return record

    # The crawler's side.

    def add(self, url, depth, referrer, via, links_in):
        """A row for url, first seen now; returns it."""
        if url in self._rows:  # a second row would put every column out of step
            raise ValueError(f"{url} has a row already")
        row = self._rows[url] = len(self._rows)
        self._done.append(0)
        self._links_in.append(links_in)
        self._referrer.append(referrer)
        self._packed += self._blank_row
        self._put(row, "depth", depth)
        self._put(row, "via", via)
        return row

    def links_to(self, row):
        """How many pages link to (or redirect to) the URL of row."""
        return self._links_in[row]

    def count_link(self, row):
        """One more page links to the URL of row; returns how many do now
        while it is waiting (not finished), 0 once it has finished."""
        self._links_in[row] += 1
        return 0 if self._done[row] else self._links_in[row]

    def new_record(self, url):
        """A Record for url, not finished yet, with its depth, referrer and via."""
        row = self._rows[url]
        return Record(url, self._get(row, "depth"), self._referrer[row], self._get(row, "via"))

    def finish(self, record):
        """Keep record as its URL's record (a URL seen before or not)."""
        row = self._rows.get(record.url)
        if row is None:
            row = self.add(record.url, record.depth, record.referrer, record.via, 0)
        self._referrer[row] = record.referrer
        values = list(self._fields_of(record))
        for i in self._texts_at:
            value = values[i]
            known = value is None or type(value) is str
            values[i] = self._string_index.get(value, -1) if known else -1
        plain = (tuple(map(type, values)) == self._plain_types
                 and self._marker_set.isdisjoint(values))
        if plain:
            try:
                self._format.pack_into(self._packed, row * self._format.size, *values)
            except struct.error:  # a number out of range, a new string (-1)
                plain = False
        if not plain:  # nulls, odd values, new strings: field by field
            for name in self._names:
                self._put(row, name, getattr(record, name))
        for name, values in self._sparse.items():
            self._put_sparse(values, row, getattr(record, name))
        self._done[row] = 1
        self._finished.append(record.url)

    def field(self, url, name):
        """One field of a record, without making the whole Record."""
        row = self._rows[url]
        return self._referrer[row] if name == "referrer" else self._get(row, name)

    def set_field(self, url, name, value):
        row = self._rows[url]
        if name == "referrer":
            self._referrer[row] = value
        else:
            self._put(row, name, value)

    # One field at a time.

    def _index(self, text):
        """The index of text (a str or None) in the table of strings, added
        if new; None for any other value, or a new string when the table
        is full (the largest index is the marker of an "H" field)."""
        if text is not None and type(text) is not str:
            return None
        index = self._string_index.get(text)
        if index is None and len(self._strings) < 2 ** 16 - 1:
            index = self._string_index[text] = len(self._strings)
            self._strings.append(text)
        return index

    def _keep_odd(self, row, name, value):
        if value is None:
            self._odd[name].pop(row, None)
        else:
            self._odd[name][row] = value

    def _put(self, row, name, value):
        sparse = self._sparse.get(name)
        if sparse is not None:
            self._put_sparse(sparse, row, value)
            return
        field, offset, marker, is_text = self._field[name]
        packed = self._index(value) if is_text else value
        if not _fits(packed, marker):
            packed = marker
            self._keep_odd(row, name, value)
        field.pack_into(self._packed, row * self._format.size + offset, packed)

    @staticmethod
    def _put_sparse(values, row, value):
        if value is None:
            values.pop(row, None)
        else:
            values[row] = value

    def _get(self, row, name):
        sparse = self._sparse.get(name)
        if sparse is not None:
            return sparse.get(row)
        field, offset, marker, is_text = self._field[name]
        value, = field.unpack_from(self._packed, row * self._format.size + offset)
        if value == marker:
            return self._odd[name].get(row)
        return self._strings[value] if is_text else value


def _marker(code):
    """The marker of a packed field of a RecordStore (struct code): the
    field's largest value, or minus infinity for a double."""
    if code == "d":
        return float("-inf")
    return 2 ** (8 * struct.calcsize("<" + code)) - 1


def _fits(value, marker):
    """Whether a packed field whose marker is marker holds value as it is."""
    if type(value) is not type(marker) or value == marker:
        return False
    return type(value) is float or 0 <= value < marker


# Skip on first reading: memory per URL.
class _PageLists:
    """A list of pages (URLs) for each row of a RecordStore, which grows
    until it is taken whole: the pages that link to a URL while it waits.
    A Python list (or tuple) each costs about 100 bytes, and on a large
    site tens of thousands of URLs wait at once; here the lists are chains
    of cells in three arrays (cell: a page and the next cell of the same
    list), and the cells of a list taken are reused."""

    def __init__(self):
        self._first = array.array("i")  # row -> its list's first cell, or -1
        self._page = []  # cell -> a page
        self._next = array.array("i")  # cell -> the next cell of the list, or -1
        self._free = -1  # the first cell not in use (chained through _next)

    def add(self, row, page):
        if row >= len(self._first):
            self._first.extend([-1] * (row + 1 - len(self._first)))
        cell = self._free
        if cell < 0:
            cell = len(self._page)
            self._page.append(page)
            self._next.append(self._first[row])
        else:
            self._free = self._next[cell]
            self._page[cell] = page
            self._next[cell] = self._first[row]
        self._first[row] = cell

    def take(self, row):
        """The pages of row's list (the last added first), which is emptied."""
        first = self._first[row] if row < len(self._first) else -1
        pages = []
        cell = first
        while cell >= 0:
            pages.append(self._page[cell])
            self._page[cell] = None
            last, cell = cell, self._next[cell]
        if first >= 0:  # the cells go back to the free chain, whole
            self._next[last], self._free = self._free, first
            self._first[row] = -1
        return pages


class _LinkCounts(collections.abc.Mapping):
    """crawler.seen: URL -> how many pages link to it (or redirect to it),
    for every URL the crawler has seen, in the order seen; a view of the
    columns of a RecordStore."""

    def __init__(self, rows, counts):
        self._rows, self._counts = rows, counts

    def __len__(self):
        return len(self._rows)

    def __iter__(self):
        return iter(self._rows)

    def __contains__(self, url):
        return url in self._rows

    def __getitem__(self, url):
        return self._counts[self._rows[url]]


def describe_error(error, url=None):
    """(error kind, short message) for an exception raised by a fetch (of
    url, whose host a DNS failure names)."""
    if isinstance(error, HTTPError):
        return error.kind, error.message
    if isinstance(error, TimeoutError):
        return "timeout", str(error).split(": ", 1)[-1] or "timed out"  # the record has the URL
    if isinstance(error, socket.gaierror):
        reason = error.strerror or str(error)
        if url is not None:  # getaddrinfo() adds the name at the end: say it first
            host = url_host(url)
            return "dns", f"cannot resolve host {host}: " + reason.replace(f" (resolving {host!r})", "")
        return "dns", f"cannot resolve host: {reason}"
    if isinstance(error, ssl.SSLCertVerificationError):
        return "tls", f"certificate verify failed: {error.verify_message}"
    if isinstance(error, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        # Worded differently by each OpenSSL and Python version: one message.
        return "tls", "TLS error: the server closed the connection in the middle of TLS"
    if isinstance(error, ssl.SSLError):
        reason = getattr(error, "reason", None) or str(error)
        hint = " (is this port plain HTTP?)" if reason == "WRONG_VERSION_NUMBER" else ""
        return "tls", f"TLS error: {reason}{hint}"
    if isinstance(error, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "reset", f"connection reset by the server ({error.strerror or error})"
    if isinstance(error, OSError):
        if error.errno == errno.ECONNREFUSED:
            return "refused", "connection refused"
        if error.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH,
                           errno.EADDRNOTAVAIL, errno.ETIMEDOUT):
            return "connect", error.strerror or str(error)
        return "network", str(error)
    if isinstance(error, InvalidURL):
        return "invalid_url", str(error)
    return "internal", f"unexpected {type(error).__name__}: {error}"


def _is_retryable(error):
    """Whether a fetch that raised error is worth another try: its kind's
    ERROR_KINDS entry says, but for a DNS answer of "try again later"."""
    if isinstance(error, socket.gaierror) and error.errno == socket.EAI_AGAIN:
        return True
    return ERROR_KINDS[describe_error(error)[0]].retried


def _out_of_file_descriptors(error):
    return isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE)


def parse_retry_after(value, now=None):
    """Seconds to wait from a Retry-After value (delay-seconds or an
    HTTP-date, RFC 9110 §10.2.3), or None if it cannot be read."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


def _rate(per_second):
    """A rate with the precision it needs: 120, 4.5, 0.25, 0.0031."""
    if per_second >= 10 or per_second == 0:
        return f"{per_second:.0f}"
    if per_second >= 1:
        return f"{per_second:.1f}"
    return f"{per_second:.2g}"


class _OriginState:
    """What the crawler keeps per origin: its host (whose requests are
    spaced by the politeness delay; None for no spacing), its robots.txt
    rules and its soft-404 probe (Futures, shared by every worker that
    needs them)."""

    __slots__ = ("host", "robots", "probe")

    def __init__(self, host):
        self.host = host
        self.robots = None
        self.probe = None  # a Future of a _SoftNotFound, or of None when there is none


class _SoftNotFound(collections.namedtuple("_SoftNotFound", "url content_type body")):
    """What an origin answered with 200 for a path that cannot exist: the
    probe's url, the response's content_type and its body without the
    probe's URL and with its volatile parts masked (_comparable)."""

    __slots__ = ()


# What may differ between two answers to the same request: numbers (a clock,
# a counter, a request id) and long hexadecimal tokens (a random id, the
# probe's own name when it is echoed in other words than its URL).
_VOLATILE = re.compile(rb"[0-9a-fA-F]{8,}|[0-9]+")


def _comparable(body, url):
    """body (bytes) as soft 404s are compared: without the echo of url and
    with every volatile part masked."""
    return _VOLATILE.sub(b"#", _without_echo(body, url))


def _without_echo(body, url):
    """body (bytes) without the URL it was fetched from, as error pages
    echo it ("/a/b was not found"): the URL, its target and the target
    percent-decoded, each also HTML-escaped. Echoes of one character (the
    target "/") are left alone."""
    target = url_target(url)
    echoes = {url, target, urllib.parse.unquote(target)}
    echoes.update([html.escape(echo) for echo in echoes])
    for echo in sorted(echoes, key=len, reverse=True):  # the URL before the target in it
        if len(echo) > 1:
            body = body.replace(echo.encode("utf-8"), b"")
    return body


def _exclude_patterns(exclude):
    """The exclude option as compiled patterns: a string or pattern is one
    pattern (not one per character). ValueError for a bad one."""
    if isinstance(exclude, (str, re.Pattern)):
        exclude = [exclude]
    try:
        return [re.compile(pattern) if isinstance(pattern, str) else pattern
                for pattern in exclude]
    except re.error as error:  # not a ValueError before Python 3.13
        raise ValueError(f"exclude: not a valid regular expression: {error}") from None


def _chosen_scope(scope, lenient):
    """The scope option, with lenient (the old spelling of "subdomains")."""
    if lenient:
        if scope not in ("host", "subdomains"):
            raise ValueError(f"lenient contradicts scope={scope!r}")
        scope = "subdomains"
    if scope not in ("host", "subdomains", "origin", "path"):
        raise ValueError(f"unknown scope {scope!r}: host, subdomains, origin or path")
    return scope


class Crawler:
    """Crawls from roots, following links within scope.

    roots: URLs or host names ("xkcd.com", "http://host:8000/path").
    Options: the keywords of OPTIONS for the "crawler" (max_tasks,
    max_redirect, max_tries, max_pages, max_depth, delay, backoff,
    max_retry_after, scope, lenient, external, external_timeout, external_tries,
    fragments, sitemaps, exclude, robots, max_url_length, max_path_segments,
    max_segment_repeats, soft_404) and for the "client" (passed
    to the Client it makes), with the defaults and meanings given there;
    times in seconds, sizes in bytes. Besides those, on_record is a
    function(Record) called as each URL finishes, and client a Client to
    use instead of making one.

    Run ``yield from crawler.crawl()`` on a loop (or use crawl()); the
    records are in ``crawler.records``, a mapping url -> Record in
    finishing order (a RecordStore: each Record read from it is a new
    snapshot). ValueError for a bad root or option."""

    def __init__(self, roots, *, on_record=None, client=None, **options):
        client_options = {key: options.pop(key) for key in list(options)
                          if key in option_defaults("client")}
        settings = take_options("crawler", options, "Crawler()")
        if isinstance(roots, str):
            roots = [roots]
        self.roots = [parse_root(root) for root in roots]
        if not self.roots:
            raise ValueError("no root URL to crawl")
        self.max_tasks = settings["max_tasks"]
        self.max_redirect = settings["max_redirect"]
        self.max_tries = settings["max_tries"]
        self.backoff = settings["backoff"]
        self.max_retry_after = settings["max_retry_after"]
        self.max_pages = settings["max_pages"]
        self.max_depth = settings["max_depth"]
        self.delay = settings["delay"]
        self.scope = _chosen_scope(settings["scope"], settings["lenient"])
        self.lenient = self.scope == "subdomains"
        self.external = settings["external"]
        self.external_timeout = settings["external_timeout"]  # never longer than --timeout
        self.external_tries = settings["external_tries"]
        self.fragments = settings["fragments"]
        self.sitemaps = settings["sitemaps"]
        self._init_link_checks()
        self.exclude = _exclude_patterns(settings["exclude"])
        self.robots = settings["robots"]
        self.max_url_length = settings["max_url_length"]
        self.max_path_segments = settings["max_path_segments"]
        self.max_segment_repeats = settings["max_segment_repeats"]
        # A run of whole segments, then the same run max_segment_repeats
        # times more, ending where a segment ends.
        self._repeated_run = re.compile(r"((?:/[^/]*)+?)\1{%d}(?=/|$)" % self.max_segment_repeats)
        self.soft_404 = settings["soft_404"]
        self.on_record = on_record
        self.client = self._client(client, client_options)
        if getattr(self.client, "timeout", None) is not None:
            self.external_timeout = min(self.external_timeout, self.client.timeout)
        self._init_scope()
        self._init_bookkeeping()

    def _client(self, client, client_options):
        """The client given, or one made with the client options."""
        if client is None:
            client_options.setdefault("max_idle_per_origin", self.max_tasks)
            client_options.setdefault("max_idle", max(100, self.max_tasks))
            return Client(**client_options)
        if client_options:
            raise TypeError(f"Crawler() got client options {sorted(client_options)} "
                            "and a client")
        return client

    def _init_scope(self):
        self.scope_hosts = set()  # the hosts of the scope, with and without "www."
        self.scope_origins = set()  # scope origin: "scheme:" + authority
        self.scope_paths = []  # scope path: URL prefixes
        self._scope_by_site = {}  # "scheme:" + authority -> on site (host, subdomains, origin)
        for root in self.roots:
            self._add_to_scope(root)

    def _init_bookkeeping(self):
        """The frontier, the records and the counts of a crawl not begun."""
        self.frontier = Queue()  # of URLs
        # With --max-depth the crawl goes one depth at a time (_join_levels):
        # the URLs deeper than the depth being crawled wait here, by depth.
        self.current_depth = 0
        self._deeper = collections.defaultdict(list)
        self._waiting_for_depth = 0  # of those, the ones to fetch (_count_waiting)
        # Every URL seen, with its depth, referrer and via, and once it
        # finished its record: url -> Record (RecordStore).
        self.records = RecordStore()
        self.seen = self.records.seen  # URL -> how many pages link to it (or redirect to it)
        # URL waiting -> (redirects_left, chain) of its FrontierItem, when
        # not (max_redirect, ()): redirect targets and off-site links.
        self._redirects = {}
        # The pages that link to a URL while it waits, beyond its referrer,
        # by its row (RecordStore.row); dropped when it finishes.
        self._linking = _PageLists()
        self._referrers = {}  # the row of a failed URL -> its referrers (bounded)
        self.pages = 0  # records of HTML pages fetched with 200 (Record.is_page)
        self.failed = 0  # records that count as failures (Record.failed)
        self.origins = {}  # (scheme, host, port) -> _OriginState
        self._next_slot = {}  # host -> loop time its next request may start
        self._slowed_hosts = set()  # hosts whose politeness delay was said (_say_slowed)
        self.in_progress = 0  # URLs taken from the frontier and not finished
        self.fetching = 0  # of those, the ones with a request on the wire
        self.fetches_started = 0
        self.offsite_unchecked = set()  # off-site links seen without --external
        self._host_slots = {}  # off-site host -> Queue of its checks running (_take_host_slot)
        self.interrupted = False
        self.started = self.finished = None
        self._workers = []

    # Skip on first reading: the bookkeeping of --fragments and --sitemaps.
    def _init_link_checks(self):
        self.anchors = {}  # --fragments: page URL -> its anchors (None: cut short)
        self.fragment_links = {}  # --fragments: (page URL, fragment) -> [referrer, depth, pages]
        self.sitemap_files = {}  # --sitemaps: sitemap URL -> its nesting (0: not in an index)
        self._guessed_sitemaps = set()  # /sitemap.xml URLs tried though no robots.txt names them
        self._sitemap_origins = set()  # the origins whose sitemaps were looked for
        self._root_origins = {url_origin(root) for root in self.roots}
        self.sitemap_listed = {}  # URL in scope -> how many times sitemaps list it
        self.sitemap_ignored = 0  # <loc> entries not queued: off the site, not valid, too deep
        self.sitemaps_read = 0

    # Scope -------------------------------------------------------------------

    def in_scope(self, url):
        """Whether url is on the site and matches no exclude pattern. The
        site, by scope: "host", the roots' hosts with or without "www."
        (scheme and port do not matter); "subdomains", those and their
        subdomains; "origin", a root's scheme, host and port; "path", a
        URL under a root's directory (the root's path up to its last "/")."""
        return self.on_site(url) and not self._excluded(url)

    def on_site(self, url):
        """Whether url is in the scope, excluded or not."""
        if self.scope_paths:
            return url.startswith(tuple(self.scope_paths))
        scheme, _, authority = url.split("/", 3)[:3]
        site = scheme + authority
        on_site = self._scope_by_site.get(site)
        if on_site is None:
            if self.scope_origins:
                on_site = site in self.scope_origins
            else:
                on_site = self._host_in_scope(split_authority(authority)[0])
            self._scope_by_site[site] = on_site
        return on_site

    def _excluded(self, url):
        return any(pattern.search(url) for pattern in self.exclude)

    def _add_to_scope(self, url):
        """Put the site of url (a root, or where a root redirects) in the
        scope; returns how the scope names it."""
        scheme, _, authority, path = (url.split("/", 3) + [""])[:4]
        host = _without_www(url_host(url))
        self.scope_hosts.update((host, "www." + host))  # for invalid links, in every scope
        if self.scope == "path":
            added = f"{scheme}//{authority}/{path[:path.rfind('/') + 1]}"
            self.scope_paths.append(added)
        elif self.scope == "origin":
            added = scheme + authority
            self.scope_origins.add(added)
            added = f"{scheme}//{authority}"
        else:
            added = host
        self._scope_by_site.clear()
        return added

    def _host_in_scope(self, host):
        return host in self.scope_hosts or (self.lenient and any(
            host.endswith("." + root) for root in self.scope_hosts))

    def _discover(self, url, redirects_left, depth, referrer, chain=(), via="link"):
        """Queue url (or, with --max-depth, keep it for its depth) unless it
        was seen before; True if it is new. Either way, count the page
        (referrer) that pointed to it."""
        row = self.records.row(url)
        if row is not None:
            if referrer is not None:
                self._count_link(url, row, referrer)
            if self._deeper and depth <= self.current_depth:
                self._bring_forward(url, row, redirects_left, depth, referrer, chain, via)
            return False
        self.records.add(url, depth, referrer, via, 0 if referrer is None else 1)
        self._note_redirects(url, redirects_left, chain)
        if self.max_depth is not None and depth > self.current_depth:
            self._deeper[depth].append(url)
            self._count_waiting(depth, 1)
        else:
            self.frontier.put_nowait(url)
        return True

    # Skip on first reading: --max-depth, a URL found again closer to a root.
    def _bring_forward(self, url, row, redirects_left, depth, referrer, chain, via):
        """url, seen before, was found again no deeper than the depth being
        crawled (by a redirect, in a sitemap, or on a page that a sitemap
        found late listed). If it waits for a later depth, it is queued now,
        as found this time: its record's depth, referrer and via say how it
        was reached. It stays in its list, where _take_waiting() skips it."""
        waited_for = self.records.field(url, "depth")
        if url in self.records or waited_for <= self.current_depth:
            return  # done, or queued
        first = self.records.field(url, "referrer")
        if first is not None and first != referrer:
            self._linking.add(row, first)  # still a page that links to it
        for name, value in (("depth", depth), ("referrer", referrer), ("via", via)):
            self.records.set_field(url, name, value)
        self._note_redirects(url, redirects_left, chain)
        self._count_waiting(waited_for, -1)
        self.frontier.put_nowait(url)

    def _note_redirects(self, url, redirects_left, chain):
        """Keep the redirects left and the chain of a waiting url, for its
        FrontierItem, unless they are a link's (max_redirect, ())."""
        if redirects_left != self.max_redirect or chain:
            self._redirects[url] = (redirects_left, chain)
        else:
            self._redirects.pop(url, None)

    def _take_waiting(self, depth):
        """The URLs that waited for depth, except those _bring_forward()
        queued since: each taken off its list as it is handed out, so that
        an interruption leaves the rest to _abandon()."""
        waiting = self._deeper[depth]
        waiting.reverse()  # so that pop() hands them out in order
        while waiting:
            url = waiting.pop()
            if self.records.field(url, "depth") == depth:
                self._count_waiting(depth, -1)
                yield url
        del self._deeper[depth]

    def _count_waiting(self, depth, change):
        """Keep count of the URLs waiting for a depth that will be crawled
        (the progress line's "queued" counts them; the deeper ones are
        only recorded)."""
        if depth <= self.max_depth:
            self._waiting_for_depth += change

    def _count_link(self, url, row, referrer):
        """One more page, referrer, links to url (seen before, at row)."""
        links_while_waiting = self.records.count_link(row)
        if links_while_waiting:
            self._linking.add(row, referrer)
            if links_while_waiting % (2 * MAX_REFERRERS) == 0:  # at most 300 kept
                self._trim_linking(row)
        elif row in self._referrers:  # failed
            self._note_referrer(url, row, referrer)

    # Skip on first reading: the linking pages of a URL, kept in bounds. A
    # failed URL lists the MAX_REFERRERS first in URL order, so that the same
    # crawl lists the same pages whatever the timing; while a URL waits, its
    # linking pages are kept as they come (_discover), and sorted and
    # trimmed now and then, not per link.
    def _trim_linking(self, row):
        """Keep only the MAX_REFERRERS first pages linking to the URL of
        row (waiting) in URL order."""
        for page in sorted(set(self._linking.take(row)))[:MAX_REFERRERS]:
            self._linking.add(row, page)

    def _note_referrer(self, url, row, referrer):
        """Keep referrer among the pages linking to url (at row), a URL
        that failed."""
        referrers = self._referrers[row]
        self.records.set_field(url, "linked_from", self.records.field(url, "linked_from") + 1)
        if referrer not in referrers and (len(referrers) < MAX_REFERRERS
                                          or referrer < referrers[-1]):
            bisect.insort(referrers, referrer)
            del referrers[MAX_REFERRERS:]
            self.records.set_field(url, "referrers", referrers)

    def _settle_referrers(self, record):
        """When record's URL finishes: a failed URL keeps its linking pages
        (and gets later ones), any other URL forgets them."""
        row = self.records.row(record.url)
        if row is None:  # a Record made elsewhere: its URL gets a row now
            row = self.records.add(record.url, record.depth, record.referrer, record.via, 0)
        others = self._linking.take(row)
        if not record.failed:
            return
        pages = set(others)
        if record.referrer is not None:
            pages.add(record.referrer)
        record.referrers = sorted(pages)[:MAX_REFERRERS]
        record.linked_from = max(self.records.links_to(row), len(pages))
        self._referrers[row] = record.referrers

    # Running -------------------------------------------------------------------

    def crawl(self):
        """Crawl until every discovered URL has its record (a coroutine).
        Returns the records (crawler.records). When the coroutine is
        cancelled (Ctrl-C), fetches in flight are cancelled and every URL
        not finished is recorded as "interrupted" before the cancellation
        goes on."""
        loop = get_event_loop()
        self._clock = loop.time  # _abandon also runs after the loop is gone
        self.started = self._clock()
        for root in self.roots:
            self._discover(root, self.max_redirect, 0, None, via="root")
        self._workers = [loop.create_task(self._work(), name=f"worker-{n}")
                         for n in range(self.max_tasks)]
        try:
            yield from self._join_levels()
            if self.fragments:
                self._check_fragments()
        except GeneratorExit:  # dropped without being run to the end: no waiting now
            self._abandon()
            raise
        except CancelledError:
            self.interrupted = True
            yield from self._shut_down()
            raise
        except BaseException:
            yield from self._shut_down()
            raise
        yield from self._shut_down()
        return self.records

    def _join_levels(self):
        """Wait until every URL queued is done. With --max-depth, one depth
        at a time: the URLs found one link deeper are queued once every URL
        of this depth is done. So each URL is first found by a page as few
        links from a root as any (breadth first, as wget -r), and what
        --max-depth cuts does not depend on which page answered first:
        otherwise a slow page lets a longer path reach a URL first."""
        yield from self.frontier.join()
        while self._deeper:
            self.current_depth = min(self._deeper)
            if self.current_depth > self.max_depth:
                for url in self._take_waiting(self.current_depth):  # recorded, never fetched
                    self._not_fetched(self.records.new_record(url), *self._too_deep())
                continue
            for url in self._take_waiting(self.current_depth):
                self.frontier.put_nowait(url)
            yield from self.frontier.join()

    def _too_deep(self):
        return "max_depth", f"not fetched: deeper than --max-depth {self.max_depth}"

    # Skip on first reading: shutting down cleanly on Ctrl-C.
    def _shut_down(self):
        """Cancel the workers and wait for them; record what is left. A
        second cancellation while this runs is held until it is done, so
        that no URL is left without a record."""
        for worker in self._workers:
            worker.cancel()
        cancelled = False
        for worker in self._workers:
            while not worker.done():
                try:
                    yield from wait_done(worker)
                except CancelledError:
                    cancelled = True
        self._abandon()
        if cancelled:
            raise CancelledError()

    def _abandon(self):
        """Record every URL still queued (or waiting for its depth) as
        interrupted and close the client (no waiting: this also runs when
        the loop is gone)."""
        waiting = []
        while not self.frontier.empty():
            waiting.append(self.frontier.get_nowait())
        for depth in sorted(self._deeper):
            waiting.extend(self._take_waiting(depth))
        for url in waiting:
            record = self.records.new_record(url)
            if self.max_depth is not None and record.depth > self.max_depth:
                self._not_fetched(record, *self._too_deep())  # never to be fetched anyway
            else:
                self._not_fetched(record, "interrupted", "not fetched: the crawl was interrupted")
        self.client.close()
        self.finished = self._clock()  # the loop's clock, as self.started

    def _work(self):
        while True:
            url = yield from self.frontier.get()
            record = self.records.new_record(url)  # with the depth, referrer and via
            redirects_left, chain = self._redirects.pop(url, (self.max_redirect, ()))
            item = FrontierItem(url, redirects_left, record.depth, record.referrer, chain,
                                record.via)
            self.in_progress += 1
            try:
                yield from self._process(item, record)
            except CancelledError:
                self._not_fetched(record, "interrupted", "not fetched: the crawl was interrupted")
                raise
            except Exception as error:  # one URL's trouble never stops the crawl
                logger.exception("%s: unexpected error", item.url)
                record.error_kind = "internal"
                record.error = f"unexpected {type(error).__name__}: {error}"
                self._finish(record)
            finally:
                self.in_progress -= 1
                self.frontier.task_done()

    def _process(self, item, record):
        url = item.url
        trap = self._trap(url)
        if trap is not None:
            return self._not_fetched(record, *trap)
        if self.max_pages is not None and self.fetches_started >= self.max_pages:
            return self._not_fetched(record, "max_pages",
                                     f"not fetched: --max-pages {self.max_pages} reached")
        origin = url_origin(url)
        on_site = self.on_site(url)
        nesting = self.sitemap_files.get(url) if self.sitemaps else None
        off_site = not on_site and nesting is None  # an off-site link checked with --external
        state = self.origins.get(origin)
        if state is None:
            state = self.origins[origin] = _OriginState(origin[1])
        rules = None
        if self.robots:
            rules = yield from self._robots_rules(origin, state, off_site)
        if self.sitemaps and on_site and origin not in self._sitemap_origins:
            self._find_sitemaps(origin, rules)
        if rules is not None and not rules.can_fetch(url_target(url)):
            return self._not_fetched(record, rules.error_kind,
                                     rules.reason or "blocked by robots.txt")
        if self.soft_404 and on_site and (state.probe is None or not state.probe.done()):
            yield from self._probe_soft_404(origin, state)
        if self.max_pages is not None and self.fetches_started >= self.max_pages:
            # Other workers started fetches while this one waited for robots.txt
            # or the soft-404 probe.
            return self._not_fetched(record, "max_pages",
                                     f"not fetched: --max-pages {self.max_pages} reached")
        self.fetches_started += 1
        started = self._clock()
        try:
            if off_site:
                yield from self._check_off_site(url, record, state)
            elif nesting is not None:
                yield from self._fetch_sitemap(item, record, state, nesting)
            else:
                yield from self._fetch_and_follow(item, record, state)
        except Exception:  # following the links failed: the record still says how long
            record.elapsed = round(self._clock() - started, 6)
            raise
        record.elapsed = round(self._clock() - started, 6)
        logger.debug("%s %s%s", record.status or "---", url,
                     f" [{record.error_kind}] {record.error}" if record.error else "")
        self._finish(record)

    def _fetch_and_follow(self, item, record, state):
        try:
            response = yield from self._fetch_with_retries(item.url, record, state,
                                                           read_body=wants_body)
        except Exception as error:
            record.error_kind, record.error = describe_error(error, item.url)
            response = error.response if isinstance(error, HTTPError) else None
            if response is not None:
                self._take_response_facts(record, response)
            if (type(error) is BodyTooLarge and response is not None and response.status == 200
                    and record.content_type in HTML_TYPES):
                # A large page is not broken: its links are in the part read.
                record.error_kind = "cut_short"
                record.error = (f"cut short: larger than --max-size; links taken from "
                                f"its first {len(response.body)} bytes")
                self._follow_links(record, response, item.depth)
        else:
            self._take_response_facts(record, response)
            if response.status in REDIRECT_STATUSES and response.location:
                self._follow_redirect(record, response.location, item)
            elif response.status == 200 and self._is_soft_404(item, response, state):
                record.error_kind, record.error = "soft_404", (
                    f"soft 404: the same answer as for {state.probe.result().url}, a path "
                    "that cannot exist; links not followed")
            elif response.status == 200 and (record.content_type in HTML_TYPES
                                             or record.content_type == CSS_TYPE):
                self._follow_links(record, response, item.depth)

    def _take_response_facts(self, record, response):
        record.status = response.status
        record.reason = response.reason
        record.content_type = response.content_type or None
        record.charset = response.charset
        record.size = len(response.body)
        record.content_length = response.content_length

    # Skip on first reading: off-site links (--external).
    def _check_off_site(self, url, record, state):
        """One check of an off-site link, never crawled further: HEAD, and
        when HEAD answers an error status (some servers refuse HEAD with
        403, 404, 405 or 501 and answer GET with 200) or an invalid
        response, one GET that stops after the head decides. At most
        EXTERNAL_PER_HOST checks run at once per host."""
        yield from self._take_host_slot(state.host)
        try:
            try:
                response = yield from self._fetch_with_retries(url, record, state, "HEAD",
                                                               off_site=True)
                if response.status >= 400:
                    response = None
            except HTTPError:
                response = None
            if response is None:
                response = yield from self._fetch_with_retries(url, record, state, "GET",
                                                               no_body, off_site=True)
        except Exception as error:
            record.error_kind, record.error = describe_error(error, url)
            if isinstance(error, HTTPError) and error.response is not None:
                self._take_response_facts(record, error.response)
        else:
            self._take_response_facts(record, response)
            if response.status in REDIRECT_STATUSES and response.location:
                try:  # say where it goes; an off-site link is not followed
                    record.redirect = resolve_location(response.location, url)
                except ValueError:
                    pass
                record.redirect = record.redirect or response.location.strip()
        finally:
            self._give_host_slot(state.host)

    def _take_host_slot(self, host):
        """Wait for one of the host's EXTERNAL_PER_HOST check slots: a
        bounded Queue holds one item per check running."""
        slots = self._host_slots.get(host)
        if slots is None:
            slots = self._host_slots[host] = Queue(EXTERNAL_PER_HOST)
        yield from slots.put(None)

    def _give_host_slot(self, host):
        self._host_slots[host].get_nowait()  # wakes the next check waiting, if any

    # Fetching ------------------------------------------------------------------

    def _fetch_with_retries(self, url, record, state, method="GET", read_body=None,
                            off_site=False, max_size=None):
        """Fetch url, retrying network errors, timeouts, 429 and 503 up to
        max_tries with exponential back-off (Retry-After honoured up to
        max_retry_after). Running out of file descriptors is waited out and
        not counted as a try. Off-site: external_tries and external_timeout
        instead of max_tries and the client's timeout. max_size: the body
        limit instead of the client's."""
        max_tries = self.external_tries if off_site else self.max_tries
        time_limit = self.external_timeout if off_site else None
        waited_for_descriptors = 0.0
        tries = 0
        while True:
            yield from self._polite_wait(state)
            tries += 1
            record.tries += 1
            try:
                response = yield from self._fetch_once(url, method, read_body, time_limit,
                                                       max_size)
            except Exception as error:
                if _out_of_file_descriptors(error):
                    tries -= 1
                    record.tries -= 1
                    delay = self._wait_for_descriptors(error, waited_for_descriptors)
                    waited_for_descriptors += delay
                    yield from sleep(delay)
                    continue
                if tries >= max_tries or not _is_retryable(error):
                    raise
                delay = self.backoff * 2 ** (tries - 1)
                logger.info("%s: %s; retrying in %.1f s", url, describe_error(error, url)[1], delay)
            else:
                if response.status not in RETRY_STATUSES or tries >= max_tries:
                    return response
                delay = self.backoff * 2 ** (tries - 1)
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                if retry_after is not None:
                    delay = min(retry_after, self.max_retry_after)
                logger.info("%s: status %d; retrying in %.1f s", url, response.status, delay)
            yield from sleep(delay)

    def _fetch_once(self, url, method="GET", read_body=None, time_limit=None, max_size=None):
        self.fetching += 1  # a request on the wire (stats)
        try:
            if read_body is None and time_limit is None:  # a Client of the caller's own
                return (yield from self.client.fetch(url, method))
            if max_size is not None:  # a sitemap
                return (yield from self.client.fetch(url, method, read_body=read_body,
                                                     time_limit=time_limit, max_size=max_size))
            return (yield from self.client.fetch(url, method, read_body=read_body,
                                                 time_limit=time_limit))
        finally:
            self.fetching -= 1

    # Skip on first reading: running out of file descriptors.
    def _wait_for_descriptors(self, error, waited):
        """Out of file descriptors (EMFILE): close the idle connections and
        return how long to wait for other fetches to give some back. Raise
        error when none is in flight that could, or after 60 s of waiting."""
        self.client.pool.close()
        if self.in_progress <= 1 or waited >= 60.0:
            raise error
        return min(2.0, 0.05 + waited / 2)

    def _polite_wait(self, state):
        """Wait for the host's next request slot: requests to one host start
        at least max(delay, the origin's Crawl-delay) seconds apart."""
        gap = self.delay
        rules = state.robots.result() if state.robots is not None and state.robots.done() else None
        if rules is not None and rules.crawl_delay:
            gap = max(gap, rules.crawl_delay)
        if gap <= 0 or state.host is None:
            return
        loop = get_event_loop()
        while True:  # workers woken together check again: the first one takes the slot
            now = loop.time()
            next_slot = self._next_slot.get(state.host, 0.0)
            if now >= next_slot:
                self._next_slot[state.host] = now + gap
                return
            if state.host not in self._slowed_hosts:
                self._say_slowed(state.host, gap, gap > self.delay)
            yield from sleep(next_slot - now)

    def _say_slowed(self, host, gap, asked_by_robots):
        """Say once per host, even without -v (a "notice"), that politeness
        is holding URLs back: the crawl may take much longer than expected."""
        self._slowed_hosts.add(host)
        who = "robots.txt asks for" if asked_by_robots else "--delay sets"
        logger.info("%s %g s between requests to %s: at most %s URLs a minute from it",
                    who, gap, host, _rate(60 / gap), extra={"notice": True})

    def _robots_rules(self, origin, state, off_site=False):
        """The origin's RobotsRules, fetched once; concurrent workers share
        one fetch through a Future."""
        if state.robots is None:
            state.robots = Future()
            try:
                rules = yield from self._fetch_robots(origin, off_site)
                logger.info("robots.txt for %s://%s: %s", origin[0],
                            host_field(*origin), rules.summary())
            except BaseException as error:
                if not isinstance(error, Exception):
                    state.robots.cancel()  # the next worker asks again
                    state.robots = None
                    raise
                logger.exception("robots.txt for %s", origin)
                rules = RobotsRules.allow_all()
            state.robots.set_result(rules)
            return rules
        return (yield from state.robots)

    def _fetch_robots(self, origin, off_site=False):
        """RFC 9309 §2.3.1: 2xx is parsed; up to 5 redirects are followed;
        4xx means no rules; 5xx, 429 or an unreachable server means
        everything is disallowed."""
        scheme, host, port = origin
        url = f"{scheme}://{host_field(scheme, host, port)}/robots.txt"
        where = url
        for _ in range(6):
            record = Record(url)
            try:
                response = yield from self._fetch_with_retries(url, record, _OriginState(None),
                                                               off_site=off_site)
            except BodyTooLarge as error:
                response = error.response  # parse the part that arrived
            except Exception as error:
                kind, message = describe_error(error, url)
                tries = f" after {record.tries} tries" if record.tries > 1 else ""
                # The host's problem first: it is why the page was not fetched either.
                return RobotsRules.disallow_all(f"{message} (robots.txt unreachable{tries})", kind)
            status = response.status
            if status in REDIRECT_STATUSES and response.location:
                try:
                    url = resolve_location(response.location, url)
                except ValueError:
                    url = None
                if url is None:
                    return RobotsRules.allow_all()
                continue
            if 200 <= status < 300:
                text = response.body.decode("utf-8", "replace")
                return RobotsRules.parse(text, product_token(self.client.user_agent))
            if status == 429 or status >= 500:
                return RobotsRules.disallow_all(
                    f"blocked: robots.txt answered {status}, which means nothing may be fetched")
            return RobotsRules.allow_all()
        logger.info("%s: more than 5 redirects; robots.txt treated as unavailable", where)
        return RobotsRules.allow_all()

    # Skip on first reading: traps, URL spaces without end.
    def _trap(self, url):
        """(kind, message) for a URL that a trap limit keeps from being
        fetched, or None. Checked on each URL taken from the frontier (not
        on each link found: most links are seen before)."""
        if len(url) > self.max_url_length:
            return "url_length", (f"not fetched: {len(url)} characters, more than "
                                  f"--max-url-length {self.max_url_length}")
        path = url_target(url).partition("?")[0]
        segments = path.split("/")  # "" first, before the path's first "/"
        if len(segments) - 1 > self.max_path_segments:
            return "path_segments", (f"not fetched: {len(segments) - 1} path segments, more "
                                     f"than --max-path-segments {self.max_path_segments}")
        # A repeated run repeats segments: most paths have none, and skip the
        # search (20 us a URL; this test, 1 us).
        if len(segments) - len(set(segments)) < self.max_segment_repeats:
            return None
        run = self._repeated_run.search(path)
        if run is not None:
            return "path_repeats", (f"not fetched: the path repeats {run.group(1)!r} more than "
                                    f"--max-segment-repeats {self.max_segment_repeats} times")
        return None

    def _probe_soft_404(self, origin, state):
        """Once per origin, before its first page: fetch a random path that
        cannot exist. An origin that answers it with 200 answers 200 for any
        path (a "soft 404"), and its pages that look like that answer are
        not followed (_is_soft_404). Workers that come meanwhile wait for
        the one probe."""
        if state.probe is not None:
            yield from state.probe
            return
        state.probe = Future()
        try:
            probe = yield from self._fetch_probe(origin, state)
        except Exception:  # a bug: the origin goes unprobed, the workers waiting go on
            logger.exception("soft-404 probe for %s", origin)
            probe = None
        except BaseException:
            state.probe.cancel()  # cancelled (Ctrl-C): the next worker asks again
            state.probe = None
            raise
        state.probe.set_result(probe)

    def _fetch_probe(self, origin, state):
        """The probe's requests: a random path, and when it is answered with
        200 a second one, to make sure two such answers are the same once
        compared (_comparable): if they are not, a page cannot be told from
        them, and soft 404s are not spotted there (the path limits still
        hold). One try each, no retries (a probe that fails only means soft
        404s are not spotted on that origin); logged at INFO (-v) with the
        outcome. Returns a _SoftNotFound or None."""
        scheme, host, port = origin
        rules = state.robots.result() if state.robots is not None and state.robots.done() else None
        answers = []
        for _ in range(2):
            target = "/crawl.py-probe-" + os.urandom(8).hex()
            url = f"{scheme}://{host_field(scheme, host, port)}{target}"
            if rules is not None and not rules.can_fetch(target):
                logger.info("soft-404 probe %s: disallowed by robots.txt; soft 404s not spotted", url)
                return None
            yield from self._polite_wait(state)
            try:
                response = yield from self._fetch_once(url, read_body=wants_body)
            except Exception as error:
                logger.info("soft-404 probe %s: %s; soft 404s not spotted",
                            url, describe_error(error, url)[1])
                return None
            if response.status != 200:
                logger.info("soft-404 probe %s: %d, as it should", url, response.status)
                return None
            if response.content_type not in BODY_TYPES:  # no links to follow: no trap
                logger.info("soft-404 probe %s: 200 with %s; soft 404s not spotted",
                            url, response.content_type)
                return None
            answers.append(_SoftNotFound(url, response.content_type,
                                         _comparable(response.body, url)))
        first, second = answers
        if (first.content_type, first.body) != (second.content_type, second.body):
            logger.info("soft-404 probes %s, %s: 200, but two answers differ; soft 404s "
                        "not spotted", first.url, second.url)
            return None
        logger.info("soft-404 probe %s: 200; pages that answer the same are soft 404s", first.url)
        return first

    def _is_soft_404(self, item, response, state):
        """Whether a 200 response is the origin's soft 404: its probes were
        answered with 200, and the response has the same content type and
        the same body once compared (_comparable: without the echo of its
        own URL, numbers and long hex tokens masked). The same, not similar:
        a real page on the same template differs in its content, however
        short (a rule by size or by how many parts differ would silently
        drop real pages). A root (depth 0) is never one: the user asked for it."""
        probe = state.probe.result() if state.probe is not None and state.probe.done() else None
        return (probe is not None and item.depth > 0
                and response.content_type == probe.content_type
                and _comparable(response.body, response.url) == probe.body)

    # Following links -----------------------------------------------------------

    def _follow_redirect(self, record, location, item):
        try:
            target = resolve_location(location, record.url)
        except ValueError as error:
            record.error_kind = "invalid_url"
            record.error = f"invalid Location {location!r}: {error}"
            return
        if target is None:  # a scheme we do not fetch: say where it pointed
            record.redirect = location.strip()
            return
        record.redirect = target
        hops = item.chain + (record.url,)
        if target in hops:
            record.error_kind = "redirect_limit"
            record.error = "redirect loop: " + " -> ".join(hops + (target,))
        elif item.redirects_left <= 0:
            record.error_kind = "redirect_limit"
            record.error = (f"too many redirects (more than {self.max_redirect}): "
                            + " -> ".join(hops + (target,)))
        else:
            if item.depth == 0 and not self.on_site(target) and not self._excluded(target):
                # A root, or a redirect from one: the user asked for that site.
                logger.info("%s added to the scope: a root redirects there",
                            self._add_to_scope(target))
            if self.in_scope(target) or (self.external and not self._excluded(target)):
                if self._discover(target, item.redirects_left - 1, item.depth, record.url, hops,
                                  "redirect"):
                    record.new_links = 1
            elif not self.on_site(target):
                self.offsite_unchecked.add(target)

    def _follow_links(self, record, response, depth):
        body = response.body
        if b"\0" in body[:1024]:
            return  # binary data sent as HTML: nothing to parse
        text = body.decode(html_charset(body, record.charset), "replace")
        found = scan_links(text) if self.fragments and record.content_type in HTML_TYPES else None
        links, invalid = find_links(text, record.url, record.content_type, found)
        record.links = len(links)
        for raw, reason, via in invalid:
            self._invalid_link(raw, reason, record.url, depth + 1, via)
        if found is not None:  # --fragments: the raw links, fragments and all
            self._note_fragments(record, text, found, depth + 1)
        seen = self.records.row  # the row of a URL seen, else None
        # A page a late sitemap listed (depth 0) may be read while a later
        # depth is crawled: its links seen before go through _discover(),
        # which brings forward those that wait for a later depth.
        closer = bool(self._deeper) and depth < self.current_depth
        for link, via in links.items():
            row = seen(link)
            if row is not None and not closer:  # only counted (most links of most pages)
                self._count_link(link, row, record.url)
            elif self.on_site(link):
                if not self._excluded(link) and self._discover(
                        link, self.max_redirect, depth + 1, record.url, (), via):
                    record.new_links += 1
            elif not self.external:
                self.offsite_unchecked.add(link)
            elif not self._excluded(link):  # checked once, never crawled
                self._discover(link, 0, depth + 1, record.url, (), via)

    # Skip on first reading: --fragments.
    def _note_fragments(self, record, text, found, depth):
        """Keep the page's anchors, and its #name links (from found, what
        scan_links found) to pages in scope, for _check_fragments."""
        self.anchors[record.url] = page_anchors(text) if record.error_kind != "cut_short" else None
        base = document_base(found, record.url)
        resolve = LinkResolver(base).resolve
        for raw in dict.fromkeys(raw for raw, _ in found.links if "#" in raw):  # each once
            link, _, fragment = _clean_link(raw).partition("#")
            if not fragment:
                continue
            # As its URL writes it: "#a b" and "#a%20b" are one anchor, one record.
            fragment = percent_encode(fragment, FRAGMENT_SAFE)
            target = resolve(link) if link else base  # an invalid link is reported as such
            if type(target) is str and self.in_scope(target):
                noted = self.fragment_links.setdefault((target, fragment), [record.url, depth, set()])
                noted[2].add(record.url)

    def _check_fragments(self):
        """After the crawl: a record (kind "fragment") for each #name link
        whose page was fetched whole as HTML and has no such anchor. The
        fragment is percent-decoded and "top" needs no anchor, as the HTML
        standard's "find a potential indicated element" says."""
        for (target, fragment), (referrer, depth, pages) in self.fragment_links.items():
            page = target
            for _ in range(self.max_redirect):  # where the redirects from target lead
                redirect = self.records.field(page, "redirect") if page in self.records else None
                if not redirect:
                    break
                page = redirect
            anchors = self.anchors.get(page)
            name = urllib.parse.unquote(fragment, errors="replace")
            if anchors is None or name in anchors or name.lower() == "top":
                continue
            url = f"{target}#{fragment}"
            record = Record(url, depth, referrer)
            self.records.add(url, depth, referrer, record.via, len(pages))
            record.error_kind = "fragment"
            record.error = f"no id or <a name> {name!r} on {page}"
            self._finish(record)

    # Skip on first reading: --sitemaps.
    def _find_sitemaps(self, origin, rules):
        """Before the first URL of an origin on the site is fetched: queue
        the sitemaps its robots.txt names (via "robots.txt"), or when it
        names none, /sitemap.xml of a root's origin (via "sitemap"; a 4xx
        there only means the site has none: kind "no_sitemap")."""
        self._sitemap_origins.add(origin)
        scheme, host, port = origin
        robots_url = f"{scheme}://{host_field(scheme, host, port)}/robots.txt"
        if rules is not None and rules.sitemaps:
            for text in rules.sitemaps:
                self._queue_sitemap(text, robots_url, "robots.txt", 0)
        elif origin in self._root_origins and (rules is None or rules.reason is None):
            guess = robots_url[:-len("robots.txt")] + "sitemap.xml"
            if guess not in self.seen:
                self._guessed_sitemaps.add(guess)
            self._queue_sitemap(guess, None, "sitemap", 0)

    def _queue_sitemap(self, text, referrer, via, nesting):
        """Queue a sitemap (text: its URL as written, resolved against
        referrer); True if it was queued."""
        try:
            url = normalize_url(text, referrer)
        except ValueError:
            url = None
        if url is None or self._excluded(url):
            self.sitemap_ignored += 1
            return False
        if url in self.records and url not in self.sitemap_files:
            # A URL has one record: a sitemap fetched before as a root or a
            # link (an index lists it, and a page got there first) stays unread.
            logger.info("%s: a sitemap, but fetched before it was known as one: not read", url)
        self.sitemap_files.setdefault(url, nesting)
        return self._discover(url, self.max_redirect, 0, referrer, (), via)

    def _fetch_sitemap(self, item, record, state, nesting):
        """Fetch a sitemap whole (up to SITEMAP_MAX_BYTES, whatever
        --max-size says) and queue what it lists: the URLs in scope as
        roots (depth 0, via "sitemap", the sitemap as referrer), the
        sitemaps of an index up to MAX_SITEMAP_NESTING deep."""
        guessed = item.url in self._guessed_sitemaps
        try:
            response = yield from self._fetch_with_retries(
                item.url, record, state, read_body=_status_ok, max_size=SITEMAP_MAX_BYTES)
        except Exception as error:
            record.error_kind, record.error = describe_error(error, item.url)
            if isinstance(error, HTTPError) and error.response is not None:
                self._take_response_facts(record, error.response)
            if type(error) is BodyTooLarge:
                record.error_kind = "sitemap"
                record.error = (f"larger than {SITEMAP_MAX_BYTES} bytes (the sitemaps.org "
                                "limit): not read")
            return
        self._take_response_facts(record, response)
        if response.status in REDIRECT_STATUSES and response.location:
            self._follow_redirect(record, response.location, item)
            if record.new_links:  # the target is the sitemap
                self.sitemap_files.setdefault(record.redirect, nesting)
                if guessed:
                    self._guessed_sitemaps.add(record.redirect)
            return
        if guessed and (400 <= response.status < 500 or (response.status == 200 and
                                                         record.content_type in HTML_TYPES)):
            record.error_kind = "no_sitemap"
            record.error = ("no sitemap: robots.txt names none, and /sitemap.xml answered "
                            + (f"{response.status}" if response.status != 200 else "an HTML page"))
            return
        if response.status != 200:
            return  # a failure as any other URL's
        try:
            is_index, locs, more = parse_sitemap(response.body)
        except SitemapError as error:
            record.error_kind, record.error = "sitemap", str(error)
            return
        self.sitemaps_read += 1
        record.links = len(locs)
        for loc in locs:
            if is_index and nesting >= MAX_SITEMAP_NESTING:
                self.sitemap_ignored += 1
            elif is_index:
                record.new_links += self._queue_sitemap(loc, record.url, "sitemap", nesting + 1)
            else:
                record.new_links += self._queue_listed(loc, record.url)
        if is_index and nesting >= MAX_SITEMAP_NESTING:
            logger.info("%s: a sitemap index %d deep; its sitemaps were not read", record.url,
                        nesting + 1)
        if more:
            self.sitemap_ignored += more
            record.error_kind = "sitemap"
            record.error = (f"{SITEMAP_MAX_URLS + more} URLs, over the sitemaps.org limit of "
                            f"{SITEMAP_MAX_URLS}: the first {SITEMAP_MAX_URLS} were read")

    def _queue_listed(self, loc, sitemap):
        """Queue a URL a sitemap lists, if it is in scope, as a root; True
        if it was queued. Sitemaps hold absolute URLs: a relative one is
        ignored, as search engines do."""
        try:
            url = normalize_url(loc)
        except ValueError:
            url = None
        if url is None or not self.in_scope(url):
            self.sitemap_ignored += 1
            return False
        self.sitemap_listed[url] = self.sitemap_listed.get(url, 0) + 1
        return self._discover(url, self.max_redirect, 0, sitemap, (), "sitemap")

    def orphans(self):
        """The URLs in scope that a sitemap lists and no crawled page links
        to (nor redirects to), roots and sitemaps aside, sorted: each link
        or redirect counts once in seen, as does each sitemap listing."""
        roots = set(self.roots)
        return sorted(url for url, listed in self.sitemap_listed.items()
                      if self.seen.get(url, 0) <= listed and url not in roots
                      and url not in self.sitemap_files)

    # Skip on first reading: links that cannot be valid URLs.
    def _invalid_link(self, raw, reason, referrer, depth, via="link"):
        """A link on a crawled page that cannot be a valid URL gets its own
        failed record (a broken link is what a link checker is for); one to
        another host only with --external, which checks off-site links (else
        it is counted as an off-site link not checked)."""
        url = invalid_link_url(raw)
        host = link_host(url)
        if host is not None and not self._host_in_scope(host) and not self.external:
            self.offsite_unchecked.add(url)
            return
        if url in self.seen:
            self._discover(url, 0, depth, referrer)  # one more page links to it
            return
        self.records.add(url, depth, referrer, via, 1)
        record = Record(url, depth, referrer, via)
        record.error_kind, record.error = "invalid_url", f"invalid link: {reason}"
        self._finish(record)

    # Records -------------------------------------------------------------------

    def _not_fetched(self, record, kind, message):
        record.error_kind, record.error = kind, message
        self._finish(record)

    def _finish(self, record):
        if record.url in self.records:  # never two records for one URL
            return
        self._settle_referrers(record)
        self.records.finish(record)
        self.pages += record.is_page
        self.failed += record.failed
        if self.on_record is not None:
            try:
                self.on_record(record)
            except Exception:  # the callback's trouble is not the URL's
                logger.exception("on_record failed for %s", record.url)

    def stats(self):
        """Counts for the report and the progress line."""
        now = self.finished or get_event_loop().time()
        elapsed = max(1e-9, now - (self.started or now))
        return {
            "urls": len(self.records),
            "pages": self.pages,
            "queued": self.frontier.qsize() + self._waiting_for_depth,
            "in_progress": self.in_progress,
            "fetching": self.fetching,
            "failed": self.failed,
            "fetched": self.fetches_started,
            "elapsed": elapsed,
            "pages_per_second": self.pages / elapsed,
            "fetched_per_second": self.fetches_started / elapsed,
        }


# The anchors of a page for --fragments: every id="..." and name="..."
# attribute. A regular expression, not html.parser, which would make
# --fragments cost six times the crawl (measured). It finds a superset (an
# id in a comment, a form field's name, "id = x" in prose): that can hide a
# missing anchor, never report one that is there.
_ANCHOR = _compile_on_first_use(
    r"""[\s"'/](?:[iI][dD]|[nN][aA][mM][eE])[ \t\n\f\r]*=[ \t\n\f\r]*"""
    r"""(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


def page_anchors(text):
    """The ids and names of an HTML page (str), character references decoded."""
    anchors = set()
    for quoted, single, bare in _ANCHOR.findall(text):
        value = quoted or single or bare
        anchors.add(html.unescape(value) if "&" in value else value)
    return anchors


def _without_www(host):
    return host[4:] if host.startswith("www.") else host


def crawl(roots, **options):
    """Crawl roots on a new event loop and return the list of Records,
    sorted by URL (options as for Crawler): the one-call helper for
    scripts."""
    crawler = Crawler(roots, **options)
    records = run(crawler.crawl())
    return sorted(records.values(), key=lambda record: record.url)


# ---------------------------------------------------------------------------
# 10. The report and the command line
# ---------------------------------------------------------------------------

EXIT_OK, EXIT_FAILED_URLS, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
# No root could be fetched (the site is down, or all of it is out of bounds):
# 3, a status no common convention (sh, sysexits.h, signals) uses.
EXIT_NOTHING_CRAWLED = 3


def format_record(record, verbose=False):
    """The report's line(s) for one record: status, URL, then what happened
    to it; a failed URL also names the first page (in URL order) that links
    to it and how many others do; verbose lists those others too."""
    status = str(record.status) if record.status is not None else "---"
    line = f"{status:>3} {record.url}"
    if record.status is not None:  # a body not read (not HTML or CSS): its Content-Length
        size = record.size or record.content_length or 0
        line += f"  {record.content_type or '-'}  {size} bytes"
        if record.links:
            line += f"  {record.new_links}/{record.links} new links"
    if record.redirect:
        line += f"  -> {record.redirect}"
    if record.error:
        line += f"  [{record.error_kind}] {record.error}"
    if record.tries > 1:
        line += f"  ({record.tries} tries)"
    referrers = record.referrers or ([record.referrer] if record.referrer else [])
    if not (record.failed and referrers):
        return line
    first, *others = referrers  # where to fix a broken link
    linked_from = max(record.linked_from or 0, len(referrers))
    line += f"  <- linked from {first}"
    if linked_from > 1:
        line += f" and {_plural(linked_from - 1, 'other page')}"
    if not verbose:
        return line
    lines = [line] + [f"      also linked from {page}" for page in others]
    unlisted = linked_from - len(referrers)
    if unlisted > 0:
        lines.append(f"      and {_plural(unlisted, 'more page')}")
    return "\n".join(lines)


def _plural(count, noun):
    return f"{count} {noun}{'' if count == 1 else 's'}"


class _SummaryCounts:
    """What the summary counts of the records, added one at a time in
    finishing order (the order of equal counts)."""

    def __init__(self):
        self.by_class, self.errors, self.not_fetched, self.failures = (
            collections.Counter() for _ in range(4))
        self.cut = collections.defaultdict(list)  # trap kind -> the URLs it cut
        self.body_bytes = self.cut_short = 0

    def add(self, record):
        kind = record.error_kind
        if record.status is not None:
            self.by_class[f"{record.status // 100}xx"] += 1
        if kind is not None and ERROR_KINDS[kind].failure:
            self.errors[kind] += 1
        if kind in NOT_FETCHED_KINDS:
            self.not_fetched[kind] += 1
        if record.failed:
            self.failures[kind or f"{record.status // 100}xx"] += 1
        if kind in TRAP_KINDS:
            self.cut[kind].append(record.url)
        self.cut_short += kind == "cut_short"
        self.body_bytes += record.size


def summarize(crawler, counts=None):
    """The summary lines printed after the crawl, each saying what it
    counts (counts: the _SummaryCounts of all its records, when the caller has
    them). The last line carries the page count ("Pages: N", HTML
    documents fetched with status 200), where scripts (and the benchmark
    harness) look for it."""
    stats = crawler.stats()
    if counts is None:
        counts = _SummaryCounts()
        for record in crawler.records.values():
            counts.add(record)
    by_class, errors, not_fetched, failures = (
        counts.by_class, counts.errors, counts.not_fetched, counts.failures)
    cut, cut_short, body_bytes = counts.cut, counts.cut_short, counts.body_bytes
    lines = []
    if crawler.interrupted:
        remaining = not_fetched.get("interrupted", 0)
        lines.append(f"INTERRUPTED: {_plural(remaining, 'URL')} remained unfetched")
    if not crawler.client.verify:
        lines.append("WARNING: TLS certificate verification was disabled")
    lines.extend(_nothing_fetched(crawler))
    lines.append("Statuses: " + (", ".join(f"{key} {by_class[key]}" for key in sorted(by_class))
                                 + " (HTTP responses)" if by_class else "none (no HTTP response)"))
    lines.append("Errors:   " + (_counts(errors) + " (no usable response)" if errors else "none"))
    lines.append("Skipped:  " + (_counts(not_fetched) + " (not fetched by choice, not failures)"
                                 if not_fetched else "none"))
    lines.append("Failed:   " + (f"{_plural(stats['failed'], 'URL')} ({_counts(failures)})"
                                 if failures else "none"))
    if cut:
        lines.append("Traps:    " + _trap_counts(cut))
    if cut_short:
        lines.append(f"Cut short: {cut_short} HTML page{'' if cut_short == 1 else 's'} larger "
                     "than --max-size, links taken from the part read")
    if crawler.offsite_unchecked:
        lines.append(f"Off-site: {_plural(len(crawler.offsite_unchecked), 'link')} not checked "
                     "(--external checks them)")
    if crawler.sitemaps:
        lines.extend(_sitemap_lines(crawler))
    lines.append(f"Bytes:    {body_bytes} (decoded bodies)")
    lines.append(f"URLs:     {stats['urls']} in {stats['elapsed']:.2f} s, {stats['fetched']} "
                 f"fetched, {_rate(stats['fetched_per_second'])} fetches/s")
    lines.append(f"Pages:    {stats['pages']} (HTML documents fetched with status 200)")
    return lines


def _sitemap_lines(crawler):
    orphans = len(crawler.orphans())
    return [f"Sitemaps: {crawler.sitemaps_read} read, listing "
            f"{_plural(len(crawler.sitemap_listed), 'URL')} on the site; "
            f"{crawler.sitemap_ignored} {'entry' if crawler.sitemap_ignored == 1 else 'entries'} "
            "ignored (off the site, not valid URLs, "
            "or past a limit)",
            "Orphans:  " + (f"{_plural(orphans, 'URL')} in a sitemap that no page links to"
                            if orphans else "none (no URL in a sitemap lacks a link)")]


def _nothing_fetched(crawler):
    """One line when the crawl fetched no page, or a root only redirected
    out of scope: the user sees why the report is (nearly) empty."""
    lines = []
    for root in crawler.roots:
        record = crawler.records.get(root)
        if (record is not None and record.redirect and not record.failed
                and record.redirect not in crawler.seen):
            lines.append(f"NOTE: the root {root} only redirects out of scope, to "
                         f"{record.redirect}")
    if not lines and not crawler.interrupted and crawler.fetches_started == 0:
        lines.append("NOTE: no URL was fetched")
    return lines


def _counts(counter):
    return ", ".join(f"{key} {count}" for key, count in counter.most_common())


def _trap_counts(cut):
    """The URLs cut by each trap defence ({kind: [URL, ...]}), by kind, each
    with where the cut began (its shortest URL): "path_repeats 12 from
    http://h/a/a/a/"."""
    return ", ".join(f"{kind} {len(urls)} from {min(urls, key=lambda url: (len(url), url))}"
                     for kind, urls in sorted(cut.items(), key=lambda item: -len(item[1])))


def report(crawler, out, quiet=False, show_unfetched=False, verbose=False):
    """Write the report to out (a text file): a line per URL sorted by URL,
    then the summary. URLs not fetched by choice (an ERROR_KINDS kind that
    is no failure) are counted but listed only with show_unfetched or
    verbose; with quiet, only the URLs that failed are listed (and those
    not fetched, with show_unfetched). With --sitemaps, the orphans follow
    (not with quiet: they are no failures)."""
    # The records are made from their rows (RecordStore) one at a time:
    # counted in finishing order (the summary's order among equal counts),
    # then made again in URL order to be listed (with quiet, only those
    # that failed).
    counts, quiet_list = _SummaryCounts(), []
    for record in crawler.records.values():
        counts.add(record)
        if quiet and (record.failed or show_unfetched and record.error_kind in NOT_FETCHED_KINDS):
            quiet_list.append(record.url)
    records = (crawler.records[url] for url in sorted(quiet_list if quiet else crawler.records))
    listed = 0
    for record in records:
        if not (quiet or show_unfetched or verbose) and record.error_kind in NOT_FETCHED_KINDS:
            continue
        out.write(format_record(record, verbose) + "\n")
        listed += 1
    if listed:
        out.write("\n")
    orphans = crawler.orphans() if crawler.sitemaps and not quiet else ()
    if orphans:  # what --sitemaps is asked for, so listed without -v
        out.write("Orphans, in a sitemap but linked from no page:\n")
        out.write("".join(f"    {url}\n" for url in orphans) + "\n")
    out.write("\n".join(summarize(crawler, counts)) + "\n")
    out.flush()


def exit_status(crawler):
    """0: every record is 2xx/3xx (or not fetched by choice); 1: some URL
    failed; 3: no root could be fetched at all; 130: interrupted."""
    if crawler.interrupted:
        return EXIT_INTERRUPTED
    roots = [crawler.records.get(root) for root in crawler.roots]
    if not any(record is not None and record.status is not None for record in roots):
        return EXIT_NOTHING_CRAWLED
    if crawler.failed:  # records that count as failures
        return EXIT_FAILED_URLS
    return EXIT_OK


# Skip on first reading: the --output file, the progress line.
class JSONLinesWriter:
    """Writes each record as one JSON line with a single write() call on an
    unbuffered file, so that a killed crawl leaves only whole lines. The
    path "-" is stdout, flushed after each line."""

    def __init__(self, path):
        self._dumps = json.dumps
        self.file = None if path == "-" else open(path, "wb", buffering=0)

    def write(self, record):
        line = self._dumps(record.as_dict(), ensure_ascii=False) + "\n"
        if self.file is not None:
            self.file.write(line.encode("utf-8"))
            return
        stdout = getattr(sys.stdout, "buffer", None)  # UTF-8 whatever the locale
        if stdout is not None:
            stdout.write(line.encode("utf-8"))
        else:
            sys.stdout.write(line)
        sys.stdout.flush()
        if stdout is not None:
            stdout.flush()

    def close(self):
        if self.file is not None:
            self.file.close()


def progress_text(crawler):
    """What the crawl is doing: URLs done and queued, requests on the wire,
    URLs waiting (for a politeness slot, a retry's back-off or robots.txt),
    failures and the fetch rate."""
    stats = crawler.stats()
    waiting = stats["in_progress"] - stats["fetching"]
    return (f"{stats['urls']} done, {stats['queued']} queued, {stats['fetching']} on the wire, "
            f"{waiting} waiting, {stats['failed']} failed, "
            f"{_rate(stats['fetched_per_second'])} fetches/s")


class ProgressLine:
    """A one-line progress display on a terminal, at most 4 updates a
    second; log lines (see _LogHandler) clear it and print above it."""

    def __init__(self, crawler, stream):
        self.crawler = crawler
        self.stream = stream
        self.timer = None

    def start(self):
        self.timer = get_event_loop().call_later(0.25, self._update)

    def _update(self):
        self.stream.write(f"\r{progress_text(self.crawler)}\x1b[K")
        self.stream.flush()
        self.start()

    def stop(self):
        if self.timer is not None:
            self.timer.cancel()
            self.stream.write("\r\x1b[K")
            self.stream.flush()


class StatusLog:
    """Off a terminal (a CI log), with -v: the progress as an INFO line
    every interval seconds, so that a long crawl shows signs of life."""

    def __init__(self, crawler, interval=10.0):
        self.crawler = crawler
        self.interval = interval
        self.timer = None

    def start(self):
        self.timer = get_event_loop().call_later(self.interval, self._update)

    def _update(self):
        logger.info("status: %s", progress_text(self.crawler))
        self.start()

    def stop(self):
        if self.timer is not None:
            self.timer.cancel()


EXAMPLES = """\
examples:
  python3 crawl.py --max-pages 100 xkcd.com        the first 100 URLs of a site
  python3 crawl.py -q localhost:8000               a link check: failures, summary
  python3 crawl.py localhost:8000 -o links.jsonl   records as JSON Lines
  python3 crawl.py -q localhost:8000 -o - | jq -r .url
                                                   every URL found, one a line
  python3 crawl.py https://example.com/ --exclude '\\.pdf$' --delay 0.5
  python3 crawl.py -q --external --fragments --sitemaps https://example.com/
                                                   a link check for CI: every link,
                                                   on the site and off it, and
                                                   every sitemap entry

exit status: 0 all URLs fine (2xx/3xx, or not fetched by choice), 1 some URL
failed (error, 4xx, 5xx) or the --output file could not be written, 2 bad
usage, 3 no root could be fetched (nothing crawled), 130 interrupted
(Ctrl-C), 143 terminated (SIGTERM).
"""


def build_parser():
    """The argparse parser: the roots, then one argument per OPTIONS entry
    that has a flag, with its default and help from the entry."""
    parser = argparse.ArgumentParser(
        prog="crawl.py", description="Crawl web sites from the given roots, following links\n"
        "on the same hosts, and report every URL found.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", metavar="ROOT",
                        help="where to start: a host (xkcd.com, localhost:8000) or an http(s) URL")
    for option in OPTIONS:
        if option.flag is not None:
            parser.add_argument(*option.flag.split("/"), dest=option.keyword,
                                help=f"{option.help} (default: {option.shown.strip('`')})",
                                **_argparse_settings(option))
    parser.add_argument("--version", action="version", version=f"crawl.py {__version__}")
    return parser


def _argparse_settings(option):
    if option.parse is SWITCH:  # the flag turns the default around
        return {"action": "store_false" if option.default else "store_true"}
    if option.parse is COUNT:
        return {"action": "count", "default": option.default}
    if option.parse is REGEXES:
        return {"action": "append", "type": regular_expression, "default": [],
                "metavar": option.metavar}
    return {"type": option.parse, "default": option.default, "metavar": option.metavar}


def main(argv=None):
    """The command line; returns the exit status (see EXAMPLES), for a usage
    error, --help and --version too (argparse's SystemExit is caught)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        _check_arguments(parser, args)
    except SystemExit as exit:
        return exit.code
    try:
        crawler = Crawler(args.roots, **{
            option.keyword: getattr(args, option.keyword) for option in OPTIONS
            if option.flag is not None and option.takes != "cli"})
    except ValueError as error:
        return _usage_error(parser, str(error))
    writer = None
    if args.output:
        try:
            writer = JSONLinesWriter(args.output)
        except OSError as error:
            crawler.client.close()
            return _usage_error(parser, f"cannot write --output {args.output!r}: "
                                        f"{error.strerror or error}")
    restore_logging = _log_to_stderr(args.verbose, notices=not args.quiet)
    try:
        return _run_crawl(crawler, args, writer)
    finally:
        if writer is not None:
            writer.close()
        restore_logging()


def _usage_error(parser, message):
    """What parser.error() prints (the usage, then one line), returning the
    status instead of raising SystemExit."""
    parser.print_usage(sys.stderr)
    sys.stderr.write(f"{parser.prog}: error: {message}\n")
    return EXIT_USAGE


def _check_arguments(parser, args):
    """Usage errors that argparse cannot see: each ends the program with
    one line and exit status 2, before anything is fetched."""
    for root in args.roots:
        try:
            parse_root(root)
        except ValueError as error:
            parser.error(f"bad root: {error}")
    for pattern in args.exclude:
        if pattern.search(""):
            parser.error(f"--exclude {pattern.pattern!r} matches every URL")
    if args.cafile:
        try:
            # A bare context: loading the system's CA store as well (what
            # create_default_context() does) costs tens of ms and checks nothing.
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(args.cafile)
        except (OSError, ssl.SSLError) as error:
            parser.error(f"--cafile {args.cafile!r}: not a readable PEM file of CA "
                         f"certificates ({getattr(error, 'strerror', None) or error})")


class _LogHandler(logging.StreamHandler):
    """Log lines on stderr, each with the seconds since the crawl started;
    a progress line on the same terminal is cleared first (it is drawn
    again below at its next update)."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("[%(elapsed).1fs] %(levelname)s %(message)s"))
        self.started = time.monotonic()
        self.progress_shown = False

    def format(self, record):
        record.elapsed = time.monotonic() - self.started
        return super().format(record)

    def emit(self, record):
        if self.progress_shown:
            self.stream.write("\r\x1b[K")
        super().emit(record)


def _log_to_stderr(verbosity, notices=True):
    """Send the "crawl" logger to stderr at WARNING, INFO (-v) or DEBUG
    (-vv), and the INFO notices unless notices is false (-q); returns a function that undoes it (main() may be called by a
    program with logging of its own)."""
    handler = _LogHandler()
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbosity, 2)]
    # An INFO record marked "notice" (extra={"notice": True}) shows without -v too.
    handler.addFilter(lambda record: record.levelno >= level
                      or (notices and hasattr(record, "notice")))
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(min(level, logging.INFO))
    logger.propagate = False

    def restore():
        logger.removeHandler(handler)
        logger.level, logger.propagate = saved

    return restore


def _progress_display(crawler, args):
    """A progress line on a terminal (log lines print above it), a status
    log line every 10 s with -v off a terminal, or None."""
    if not args.quiet and sys.stderr.isatty():
        for handler in logger.handlers:
            if isinstance(handler, _LogHandler):
                handler.progress_shown = True
        return ProgressLine(crawler, sys.stderr)
    if args.verbose:
        return StatusLog(crawler)
    return None


def _run_crawl(crawler, args, writer):
    loop = EventLoop()
    set_event_loop(loop)
    crawl_task = loop.create_task(crawler.crawl(), name="crawl")
    signal_received = []
    output_failed = []

    def on_signal(signum, frame):
        if signal_received:  # the second Ctrl-C: leave at once
            os._exit(EXIT_INTERRUPTED if signum == signal.SIGINT else EXIT_TERMINATED)
        signal_received.append(signum)
        loop.call_soon_threadsafe(crawl_task.cancel)

    def write_record(record):
        if output_failed:
            return
        try:
            writer.write(record)
        except OSError as error:  # a full disk: stop rather than lose records
            output_failed.append(error)
            if not (args.output == "-" and isinstance(error, BrokenPipeError)):
                logger.error("cannot write --output %r: %s; stopping the crawl",
                             args.output, error.strerror or error)
            crawl_task.cancel()  # also for | head: the reader has seen enough

    if writer is not None:
        crawler.on_record = write_record
    previous = {signum: signal.signal(signum, on_signal)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    progress = _progress_display(crawler, args)
    if progress is not None:
        progress.start()
    try:
        loop.run_until_complete(crawl_task)
    except CancelledError:
        pass
    finally:
        if progress is not None:
            progress.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        loop.close()
        set_event_loop(None)
    out = sys.stderr if args.output == "-" else sys.stdout  # stdout has the records
    try:
        report(crawler, out, quiet=args.quiet, show_unfetched=args.show_unfetched,
               verbose=args.verbose > 0)
    except BrokenPipeError:  # e.g. | head: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if signal_received:
        return EXIT_TERMINATED if signal_received[0] == signal.SIGTERM else EXIT_INTERRUPTED
    if output_failed:
        return EXIT_FAILED_URLS
    return exit_status(crawler)


# ---------------------------------------------------------------------------
# 11. Making it fast
# ---------------------------------------------------------------------------
#
# Everything here is an optimisation of something defined above, kept
# out of the first reading: the same answers, fewer microseconds.

# Link extraction: the HTML Standard's tokenizer ----------------------------
#
# scan_links() is the one link extractor. It follows the HTML Standard's
# tokenizer (and the few tree-construction rules that switch its state)
# as far as links depend on it; html.parser is not used, because it reads
# markup differently (comments, tag extents, raw text elements, character
# references) and differently in each Python version.
#
# Text, comments, end tags, doctypes and every start tag that names no link
# are stepped over by one regular expression, _SKIP, in C. It stops only at
# a start tag of RESOURCE_ATTRIBUTES or _TEXT_ONLY (or base, meta,
# frameset) that may name something, or at a construct left open at the
# end of the input; at a plain <a href>, <img src> or <link href> (the
# commonest links) it stops with the value in hand.
# What the standard says, construct by construct:
#   - a start or end tag is "<" + name + attributes up to the first ">"
#     outside a quoted attribute value (_tag_rest); one never closed
#     swallows the rest of the input;
#   - a comment "<!--" ends at "-->" or "--!>", and "<!-->", "<!--->" are
#     whole comments; <!DOCTYPE ...>, <?...>, "</" + non-letter and, in
#     HTML content, <![CDATA[ are bogus comments up to the first ">";
#   - "<" followed by anything else is text;
#   - after <script>, <style>, <title>, <textarea>, <xmp>, <iframe>,
#     <noembed> and <noframes> the text up to the element's end tag is not
#     markup (script data has its own "<!--" escapes), and after
#     <plaintext> nothing is. <noscript> content is read as markup: a
#     crawler is a browser with scripting off.
# Judgement calls: <a href> inside <svg> and <a href> inside <select> are
# links (browsers follow an SVG <a>, and the customizable-select change
# parses <select> content as body content); <frame> counts only after a
# <frameset> start tag (the standard ignores it anywhere else). Two kinds
# of tree-construction state are not tracked, as tracking them means
# following the text between tags, which _SKIP steps over in C:
#   - foreign content (<svg>, <math>): <![CDATA[ is a bogus comment even
#     there (the difference: a ">" inside such a section), and <style> or
#     <script> inside <svg> hide what follows as in HTML (a browser reads
#     it as markup, and an <img> there breaks out of the <svg>);
#   - the frameset-ok flag and the "in frameset" mode: a <frameset> start
#     tag counts even after text (a browser then ignores it), and in a
#     frameset <script> and the other text-only elements but <noframes>
#     still hide what follows (a browser ignores those start tags there).
#
# One regex trick needs a word: a tag's attributes are matched as an
# "atomic group": once they have matched, the engine cannot backtrack into
# another (wrong) reading of them, and a tag that is never closed fails at
# once instead of after exponential backtracking. Python's re has atomic
# groups, (?>...), from 3.11 on, and the scanner uses them from 3.11.5 on
# (earlier 3.11 releases can match wrongly with possessive repeats,
# CPython gh-106052); before, the attributes are matched inside a
# lookahead and consumed with a backreference, (?=(...))\1, which does the
# same (a lookahead is never re-entered once it has matched).
# From 3.11.5 on, _SKIP (and _PLAIN_ATTRIBUTE) also make possessive ("*+",
# "++", "{m,n}+") the repeats where backtracking could never lead to
# another match: a run of characters of a class followed by a character
# outside it (a shorter run would leave a character of the class, which
# what follows cannot start with; the one exception, an unquoted value
# ending in "/" before ">", which a shorter run could read as "/>", ends
# the tag at the same ">" either way), a shorter run of attributes
# likewise, and the repeat of constructs, which is followed by a part that
# matches whatever comes.
# The matches are the same, without the backtracking points the engine
# would keep for each repetition, or the steps back one character at a
# time when what follows fails (measured with callgrind: -17%, then -7% of
# scan_links' instructions on the Apache manual). The patterns are
# written with these repeats, and _possessive() makes them plain greedy
# ones before 3.11.5.
_ATOMIC_GROUPS = sys.version_info >= (3, 11, 5)


def _possessive(pattern):
    """The pattern as written ("]*+", "]++" and "}+" are possessive) from
    3.11.5 on; before, with those repeats greedy, which match the same.
    (No pattern of the scanner has a "]" or "}" followed by a literal "+".)"""
    if _ATOMIC_GROUPS:
        return pattern
    return re.sub(r"(\]\*|\]\+|\})\+", r"\1", pattern)

# A tag name runs to a space, "/" or ">": the lookahead says so, and keeps
# the engine from retrying every shorter name (each followed by a new
# reading of the attributes) when the tag is never closed, which took time
# quadratic in the length of the name.
_TAG_NAME = r"[a-zA-Z][^\t\n\f\r />]*(?=[\t\n\f\r />])"
# An attribute: a name (a first "=" belongs to it), then optionally "="
# and a value, quoted (a quote never closed runs to the end) or not.
_ATTRIBUTE = (r"""[\t\n\f\r /]*([^\t\n\f\r />][^\t\n\f\r />=]*)"""
              r"""(?:[\t\n\f\r ]*=[\t\n\f\r ]*("[^"]*"?|'[^']*'?|[^\t\n\f\r >]*))?""")
_ATTRIBUTE_SHAPE = (r"""[\t\n\f\r /]*[^\t\n\f\r />][^\t\n\f\r />=]*"""
                    r"""(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:"[^"]*"?|'[^']*'?|[^\t\n\f\r >]*))?""")


# No match repeats attributes more than _ATTRIBUTES_AT_ONCE times in all
# (see _read_tag; a pattern with several runs of attributes gives each a
# share): up to that many attributes, each read the first way it can be.
_ATTRIBUTES_AT_ONCE = 1000
_ATTRIBUTE_RUN_SHAPE = r"(?:%s){0,%d}" % (_ATTRIBUTE_SHAPE, _ATTRIBUTES_AT_ONCE)


def _tag_rest(group):
    """The pattern of a tag's attributes (at most _ATTRIBUTES_AT_ONCE) and
    its ">", atomic (see _ATOMIC_GROUPS); before 3.11.5 the lookahead trick
    needs the attributes as a group: group number `group`."""
    attributes = _ATTRIBUTE_RUN_SHAPE + r"[\t\n\f\r /]*"
    if not _ATOMIC_GROUPS:
        return r"(?=(%s))\%d>" % (attributes, group)
    return r"(?>%s)>" % attributes


_ATTRIBUTES = re.compile(_ATTRIBUTE)

# Skip on first reading: a tag with a million attributes. The regex engine
# keeps a few hundred bytes for each repetition of a repeat while it
# matches (a 300 KB page that is one tag of 100,000 attributes took 43 MB,
# a 10 MB one 1.3 GB), so _SKIP stops at a tag with more than
# _ATTRIBUTES_AT_ONCE attributes, and _read_tag() reads it in runs of that
# many, one match each.
_TAG_OPEN = re.compile(r"<(/?)(%s)" % _TAG_NAME)
# The first reading of each attribute, as in _tag_rest's atomic group:
# nothing follows the repeat in this pattern, so none other is tried.
_ATTRIBUTE_RUN = re.compile(_ATTRIBUTE_RUN_SHAPE)
_TAG_CLOSE = re.compile(r"[\t\n\f\r /]*>")


def _read_tag(text, i):
    """The start or end tag at text[i] == "<": (the name of a start tag, or
    None for an end tag; where its attributes start; where they end; where
    the tag ends), or None if it is never closed."""
    opening = _TAG_OPEN.match(text, i)
    if opening is None:
        return None
    position = opening.end()
    while True:  # until a run reads no attribute
        run_end = _ATTRIBUTE_RUN.match(text, position).end()
        if run_end == position:
            break
        position = run_end
    closing = _TAG_CLOSE.match(text, position)
    if closing is None:
        return None
    name = None if opening.group(1) else opening.group(2)
    return name, opening.end(), position, closing.end()

# Tags whose content is text, with the pattern that finds the start of
# their end tag ("</name" then a space, "/" or ">").
_TEXT_ONLY = {name: re.compile(r"</%s(?=[\t\n\f\r />])" % name, re.I | re.A)
              for name in ("script", "style", "title", "textarea", "xmp", "iframe",
                           "noembed", "noframes", "plaintext")}
_SCAN_TAGS = frozenset(RESOURCE_ATTRIBUTES).union(_TEXT_ONLY, ("base", "meta", "frameset", "image"))


def _names_pattern(names):
    """A pattern for any of the names, in any case, shaped as a tree by
    first letter: a stop at every tag tries a handful of letters, not
    every name (measured: about 25% less time in _SKIP). Each branch
    starts with a literal letter, lower or upper case, as re skips such a
    branch with one comparison when the letter differs (measured: -4%)."""
    by_first = collections.defaultdict(list)
    for name in names:
        by_first[name[0]].append(name[1:])
    branches = []
    for first, rests in sorted(by_first.items()):
        longer = "|".join(sorted(filter(None, rests), key=len, reverse=True))
        optional = "?" if "" in rests else ""
        for letter in dict.fromkeys((first, first.upper())):  # once if not a letter
            branches.append(letter + (f"(?i:{longer}){optional}" if longer else ""))
    return "(?:%s)" % "|".join(branches)


# The names of the tags to scan, and where the tag name must end.
_SCAN_TAG_NAME = _names_pattern(_SCAN_TAGS) + r"(?=[\t\n\f\r />]|\Z)"

# The plain shape most tags have: an ASCII name, then attributes separated
# by spaces, each an ASCII name with an optional value that is quoted or a
# plain word. For this shape the standard's reading is unambiguous.
_PLAIN_NAME = r"[a-zA-Z_:][-a-zA-Z0-9_:.]*+"
_PLAIN_VALUE = r"""(?:"[^"]*+"|'[^']*+'|[^\t\n\f\r "'=<>`]++)"""
_PLAIN_ATTRIBUTE = re.compile(_possessive(
    r"[\t\n\f\r ]+(%s)(?:[\t\n\f\r ]*=[\t\n\f\r ]*(%s))?" % (_PLAIN_NAME, _PLAIN_VALUE)))
# In the patterns that step over plain tags, the commonest shapes come
# first, as re tries a literal at once where an optional space takes a
# repeat: an attribute's "=" then its value, "=" then spaces and the value,
# spaces and "=" and the value, or no value; a tag's end is ">", "/>", or
# spaces, "/" and ">" (measured: -6% of scan_links' instructions on the
# Apache manual). No two alternatives start alike: where a later part
# fails, the engine (before 3.11.5, where they are not possessive) tries
# the other readings of each attribute, and two that match the same text
# made that exponential in the number of attributes.
_PLAIN_EQUALS_VALUE = r"(?:=%s|=[\t\n\f\r ]++%s|[\t\n\f\r ]++=[\t\n\f\r ]*+%s|)" % (
    (_PLAIN_VALUE,) * 3)
_PLAIN_TAG_END = r"(?:>|/>|[\t\n\f\r ]++/?>)"
_PLAIN_ATTRIBUTES = r"(?:[\t\n\f\r ]++%s%s){0,%d}+" % (
    _PLAIN_NAME, _PLAIN_EQUALS_VALUE, _ATTRIBUTES_AT_ONCE)


def _plain_attributes_but(*names, unless=None, runs=1):
    """A pattern for plain attributes of which none is called one of the
    names (in any case), or matches the pattern unless: at most a share of
    _ATTRIBUTES_AT_ONCE, for a pattern with that many runs of them."""
    attribute = r"(?!(?i:%s)(?![-a-zA-Z0-9_:.]))%s%s" % (
        "|".join(names), _PLAIN_NAME, _PLAIN_EQUALS_VALUE)
    if unless is not None:
        attribute = "(?:%s|%s)" % (attribute, unless)
    return r"(?:[\t\n\f\r ]++%s){0,%d}+" % (attribute, _ATTRIBUTES_AT_ONCE // runs)


# Tags to scan that _SKIP steps over when they are of the plain shape and
# name nothing, so that scan_links() does not stop at them (measured: a
# stop costs a few microseconds in Python; every page has these tags):
# <meta> without a name attribute (only name=robots counts), and <title>,
# <style> and <script> without src whose text holds no "<" (so nothing in
# it can end the element early or start an escape) up to a plain end tag.
# (The lookahead on the four names' first letters lets the engine leave at
# once at any other tag to scan: a branch that starts with (?i:...) is
# always entered.)
_NOTHING_TO_SCAN = r"""<(?=[mMtTsS])(?:
      (?i:meta)%(no_name)s%(end)s
    | (?i:title)%(plain)s%(end)s[^<]*+</(?i:title)>
    | (?i:style)%(plain)s%(end)s[^<]*+</(?i:style)>
    | (?i:script)%(no_src)s%(end)s[^<]*+</(?i:script)>)""" % {
    "plain": _PLAIN_ATTRIBUTES, "no_name": _plain_attributes_but("name"),
    "no_src": _plain_attributes_but("src"), "end": _PLAIN_TAG_END}

# A rel attribute of the plain shape rel=value that cannot say nofollow:
# "nofollow" in no case (and no character outside ASCII lower-cases to one
# of its letters), no "&" (a character reference could spell it), no NUL.
# The lookaheads' runs are greedy, not possessive: they give back
# characters until "nofollow" can follow.
_REL_NOT_NOFOLLOW = r"""(?i:rel)=(?:
      "(?![^"]*(?i:nofollow))[^"&\x00]*+"
    | '(?![^']*(?i:nofollow))[^'&\x00]*+'
    | (?![^\t\n\f\r "'=<>`]*(?i:nofollow))[^\t\n\f\r "'=<>`&\x00]++)"""

# The commonest links of all: (tag, attribute, an attribute that may change
# what the link means, a pattern for that attribute where it changes
# nothing, or None). A rel may say nofollow; a srcset adds links.
_FAST_LINKS = (("a", "href", "rel", _REL_NOT_NOFOLLOW), ("img", "src", "srcset", None))


def _plain_link_value(tag, attribute, first=1):
    """The pattern of a plain value with no character reference or NUL,
    which _SKIP captures without its quotes in a group named
    tag_attribute_n: n is first (double quotes), first + 1 (single
    quotes) or first + 2 (no quotes)."""
    return r"""(?:"(?P<%(group)s_%(n1)d>[^"&\x00]*+)"
        | '(?P<%(group)s_%(n2)d>[^'&\x00]*+)'
        | (?P<%(group)s_%(n3)d>[^\t\n\f\r "'=<>`&\x00]++))""" % {
        "group": f"{tag}_{attribute}", "n1": first, "n2": first + 1, "n3": first + 2}


def _plain_link_tag(tag, attribute, changes, harmless):
    """The pattern of a <tag> of the plain shape with no attribute changes
    (unless it matches harmless), whose first attribute called attribute
    has a plain value (_plain_link_value): no Python reads the tag."""
    return r"""<%(tag)s%(before)s[\t\n\f\r ]++(?i:%(attribute)s)[\t\n\f\r ]*+=[\t\n\f\r ]*+
        %(value)s%(after)s%(end)s""" % {
        "tag": _names_pattern([tag]), "attribute": attribute,
        "value": _plain_link_value(tag, attribute),
        "before": _plain_attributes_but(attribute, changes, unless=harmless, runs=2),
        "after": _plain_attributes_but(changes, unless=harmless, runs=2), "end": _PLAIN_TAG_END}


# A rel of <link> that names a resource to fetch: one of its tokens is in
# LINK_RESOURCE_RELS. A lookahead finds the token, so that the value is
# read one way only (before 3.11.5, a value of many such tokens would be
# read once per token when a later part fails).
_RESOURCE_REL = r"""(?i:rel)=(?:
      "(?=(?:[^"&\x00]*[\t\n\f\r ])?(?i:%(rels)s)[\t\n\f\r "])[^"&\x00]*+"
    | '(?=(?:[^'&\x00]*[\t\n\f\r ])?(?i:%(rels)s)[\t\n\f\r '])[^'&\x00]*+'
    | (?i:%(rels)s)(?![^\t\n\f\r "'=<>`]))""" % {
    "rels": "|".join(sorted(LINK_RESOURCE_RELS, key=len, reverse=True))}

# <link> of the plain shape with one rel, one that names a resource, and an
# href=value (the first href) before or after it: the value in link_href_1
# to _3 (rel first) or _4 to _6 (href first).
_PLAIN_LINK_ELEMENT = r"""<%(link)s%(neither)s[\t\n\f\r ]++
    (?:%(rel)s%(neither)s[\t\n\f\r ]++(?i:href)=%(rel_first)s
    | (?i:href)=%(href_first)s%(no_rel)s[\t\n\f\r ]++%(rel)s)
    %(no_rel)s%(end)s""" % {
    "link": _names_pattern(["link"]), "neither": _plain_attributes_but("href", "rel", runs=3),
    "no_rel": _plain_attributes_but("rel", runs=3),
    "rel": _RESOURCE_REL, "rel_first": _plain_link_value("link", "href"),
    "href_first": _plain_link_value("link", "href", first=4), "end": _PLAIN_TAG_END}

_PLAIN_LINK_TAGS = "|".join([_plain_link_tag(*fast) for fast in _FAST_LINKS] + [_PLAIN_LINK_ELEMENT])

# All the named groups of _SKIP are in its last, optional part, so that
# match.lastindex says which of them, if any, ended the match (before
# 3.11.5, groups 1 and 2, in the repeated part, have no name). A tag with
# no quotes, the commonest kind, is tried before the plain shape, whose
# repeat costs more to enter (measured: -4%); as such a tag ends at its
# first ">", either reading of it ends at the same place.
_SKIP = re.compile(_possessive(r"""(?:[^<]*+(?:  # text, then one of:
      </[a-zA-Z][^\t\n\f\r />]*+>                   # an end tag, plain shape
    | <(?!%(scan)s)(?:                              # a start tag not to scan:
          [a-zA-Z][^>"']*+>                                   # no quotes
        | [a-zA-Z][-a-zA-Z0-9_:.]*+%(plain)s%(end)s             # plain shape
        | %(name)s%(rest1)s)                                  # any shape
    | </%(name)s%(rest2)s                           # an end tag of any shape
    | <!--(?:-?>|.*?--!?>)                          # a comment
    | <!(?!--)[^>]*+>                               # doctype, bogus comment, <![CDATA[
    | <\?[^>]*+>                                    # a bogus comment
    | </>                                           # nothing
    | </(?![a-zA-Z>])(?=.)[^>]*+>                   # a bogus comment
    | <(?![a-zA-Z/!?])                              # a "<" that starts nothing
    | %(nothing)s                                   # a tag to scan that names nothing
    )){0,10000}+[^<]*+
    (?:%(link_tags)s                                # <a href>, <img src>, <link href>: the value
    | <(?P<tag>%(scan)s)(?P<attributes>%(plain)s)%(end)s)?  # a tag to scan, plain
    """ % {"scan": _SCAN_TAG_NAME, "plain": _PLAIN_ATTRIBUTES, "name": _TAG_NAME,
           "rest1": _tag_rest(1), "rest2": _tag_rest(2),
           "nothing": _NOTHING_TO_SCAN, "link_tags": _PLAIN_LINK_TAGS,
           "end": _PLAIN_TAG_END}), re.S | re.X | re.A)


def _via_of_group(name):
    """The via of the link in the group of _SKIP called name (see
    _plain_link_value)."""
    tag, attribute, _ = name.split("_")
    return dict(RESOURCE_ATTRIBUTES[tag])[attribute]


# The number of each group of _SKIP that holds a plain link -> its via.
_FAST_LINK_VIA = {number: _via_of_group(name) for name, number in _SKIP.groupindex.items()
                  if name not in ("tag", "attributes")}
_ATTRIBUTES_GROUP = _SKIP.groupindex["attributes"]


def _first_plain_attribute(attrs, name):
    """For _PLAIN_ATTRIBUTE.findall()'s [(name, raw value)]: the value as
    the tokenizer gives it (quotes removed, character references decoded)."""
    for key, value in attrs:
        if key == name or (len(key) == len(name) and key.lower() == name):
            if not value:
                return ""  # an attribute with no value has the value ""
            if value[0] in "\"'":
                value = value[1:-1]
            return unescape_attribute(value)
    return None


class _FoundLinks:
    __slots__ = ("links", "base", "nofollow", "frameset")

    def __init__(self):
        self.links = []  # (raw attribute value, via) in document order
        self.base = None
        self.nofollow = False
        self.frameset = False


def scan_links(text):
    """The links of HTML text (str) as the HTML Standard's tokenizer reads
    it: an object with .links ([(raw value, via)]), .base (the first <base
    href>) and .nofollow (<meta name=robots content=nofollow> or none)."""
    found = _FoundLinks()
    links = found.links
    position = 0
    while position < len(text):
        # _SKIP matches (maybe nothing) wherever it starts, so each match
        # of finditer() starts where the one before ended (finditer()
        # spares the setting up that a match() call per stop takes:
        # measured, -8% of scan_links' instructions). The loop ends at a
        # text-only element's start tag, whose text is skipped below, or
        # at a match of nothing: a "<" that _SKIP does not step over, or
        # the end of the text.
        for match in _SKIP.finditer(text, position):
            stop = match.lastindex  # the group that ended the match, if any
            via = _FAST_LINK_VIA.get(stop)
            if via is not None:  # a plain <a href>, <img src> or <link href>
                links.append((match[stop], via))
            elif stop == _ATTRIBUTES_GROUP:  # a plain tag to scan: its attributes are simple
                tag = match.group("tag").lower()
                attrs = _PLAIN_ATTRIBUTE.findall(match[stop])
                link_from_tag(found, tag, attrs, _first_plain_attribute)
                if tag in _TEXT_ONLY:
                    break
            elif match.end() == match.start():
                break
        # Out of the loop, so that the memory the matching took is freed
        # (before 3.11, a megabyte for a tag of 1,000 attributes).
        if stop == _ATTRIBUTES_GROUP:
            position = _skip_text_only(text, match.end(), tag)
        else:
            position = _scan_construct(text, match.start(), found)
    return found


def _scan_construct(text, i, found):
    """The construct at text[i] == "<" that _SKIP left: a tag to scan that
    is not of the plain shape, a tag with more than _ATTRIBUTES_AT_ONCE
    attributes, or one never closed. Returns where the next construct
    starts."""
    read = _read_tag(text, i)
    if read is None:
        # A tag, comment or bogus comment never closed: it swallows the rest.
        return len(text)
    name, attributes_start, attributes_end, end = read
    tag = name.lower() if name is not None and name.isascii() else ""  # an end tag scans nothing
    if tag in _SCAN_TAGS:
        attrs = _attributes_read(_ATTRIBUTES.finditer(text, attributes_start, attributes_end))
        link_from_tag(found, tag, attrs, _first_tag_attribute)
        if tag in _TEXT_ONLY:
            return _skip_text_only(text, end, tag)
    return end


# The attributes link_from_tag() reads: the links of RESOURCE_ATTRIBUTES,
# and those that say whether a link counts (rel, type) or what a <base>
# or a <meta> says.
_ATTRIBUTES_READ = frozenset(
    name for named in RESOURCE_ATTRIBUTES.values() for name, _ in named).union(
    ("rel", "type", "href", "name", "content"))


def _attributes_read(matches):
    """[(lower-case name, raw value)] of the first attribute of each name in
    _ATTRIBUTES_READ, from _ATTRIBUTES matches; the others are dropped as
    they come, as a tag may have millions of them."""
    attrs = {}
    for match in matches:
        name = match.group(1).lower()
        if name in _ATTRIBUTES_READ and name not in attrs:
            attrs[name] = match.group(2) or ""  # "" for an attribute with no value
    return list(attrs.items())


def _first_tag_attribute(attrs, name):
    """For _attributes_read()'s [(lower-case name, raw value)]: the
    first value of that name, as the tokenizer decodes it."""
    for key, value in attrs:
        if key == name:
            if value[:1] in ("'", '"'):
                value = value[1:-1]
            return unescape_attribute(value)
    return None


def _skip_text_only(text, i, tag):
    """After the start tag of a _TEXT_ONLY element: where its end tag ends
    (the end of the text if there is none)."""
    if tag == "plaintext":
        return len(text)
    if tag == "script":
        start = _script_end(text, i)
    else:
        match = _TEXT_ONLY[tag].search(text, i)
        start = match.start() if match else len(text)
    read = _read_tag(text, start)
    if read is None:
        return len(text)
    _, _, _, end = read
    return end


_SCRIPT_DATA = re.compile(r"<!--|</script(?=[\t\n\f\r />])", re.I | re.A)
_SCRIPT_ESCAPED = re.compile(r"-->|</?script(?=[\t\n\f\r />])", re.I | re.A)
_SCRIPT_DOUBLE_ESCAPED = re.compile(r"-->|</script(?=[\t\n\f\r />])", re.I | re.A)


# Skip on first reading: the script data states of the tokenizer.
def _script_end(text, i):
    """Where the </script> that ends script data starting at i begins. In
    script data, "<!--" starts an escaped section that "-->" ends; there a
    "<script" starts a double-escaped one, in which "</script" does not
    end the script but only the double escape."""
    escaped = double = False
    while True:
        pattern = _SCRIPT_DOUBLE_ESCAPED if double else (
            _SCRIPT_ESCAPED if escaped else _SCRIPT_DATA)
        match = pattern.search(text, i)
        if match is None:
            return len(text)
        token = match.group()
        if token == "<!--":
            escaped, i = True, match.start() + 2  # "<!-->" ends it at once
        elif token == "-->":
            escaped = double = False
            i = match.end()
        elif token[1] != "/":  # "<script" in an escaped section
            double, i = True, match.end()
        elif double:  # "</script" ends the double escape
            double, i = False, match.end()
        else:
            return match.start()


_BASES = {}  # base URL -> (scheme, authority, path, query) of its normalized form


def split_base(base):
    """(scheme, authority, path, query) of a base URL's normalized form,
    which normalize_url() needs for every relative link: cached, since a
    page's links share one base."""
    parts = _BASES.get(base)
    if parts is None:
        parts = _normalized_base_parts(base)
        if parts is None:
            normalized = normalize_url(base)
            if normalized is None:
                raise InvalidURL(f"base URL {base!r} is not an absolute http(s) URL")
            scheme, _, rest = normalized.partition("://")
            slash = rest.find("/")
            path, question, query = rest[slash:].partition("?")
            parts = (scheme, rest[:slash], path, query if question else None)
        if len(_BASES) >= 256:  # one base serves all the links of a page
            _BASES.clear()
        _BASES[base] = parts
    return parts


# A base URL of this shape may be normalized already, as the URL of the
# page being read (the usual base) is: then its parts are what
# normalize_url() would give. Its path and query hold only characters
# normalization keeps, with no empty or dot-segment.
_NORMALIZED_BASE = re.compile(r"""(https?)://([a-z0-9._-]+)(?::([1-9][0-9]{0,4}))?
    ((?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+/?|/)(?:\?([A-Za-z0-9._~=&-]*))?\Z""", re.X)


def _normalized_base_parts(base):
    """split_base()'s parts of a base URL that normalize_url() leaves as it
    is, found without it (measured, callgrind: LinkResolver() for a
    page's own URL takes half the instructions); else None."""
    match = _NORMALIZED_BASE.match(base)
    if match is None:
        return None
    scheme, host, port, path, query = match.groups()
    try:
        if parse_host(host) != host:  # an IPv4 number form, say
            return None
    except ValueError:
        return None
    if port is not None:
        if int(port) > 65535 or int(port) == DEFAULT_PORTS[scheme]:
            return None
        host += ":" + port
    return scheme, host, path, query


class LinkResolver:
    """normalize_url(raw, base) with a cache shared by all documents.

    Pages of one site repeat the same links, and a relative link's meaning
    depends on only part of the base: a path like "../a.html" on the base's
    directory, "/a.html" on its origin, "https://x/" on nothing. Keying the
    cache by that part lets every page in a directory share the entries."""

    _cache = {}  # (context, raw link) -> URL str, None, or the ValueError
    MAX_ENTRIES = 10_000

    def __init__(self, base):
        self.base = base
        scheme, authority, path, _ = split_base(base)
        self.origin = f"{scheme}://{authority}"
        self.directory = self.origin + path[:path.rfind("/") + 1]
        self.scheme = scheme
        self._above = {}  # levels up -> that directory, worked out once per page

    def _up(self, levels):
        """The directory levels above the base's ("../" removes one)."""
        directory = self._above.get(levels)
        if directory is None:
            directory = self.directory
            for _ in range(levels):
                cut = directory.rfind("/", len(self.origin), len(directory) - 1)
                if cut < 0:
                    break  # at the root: ".." above it is dropped (RFC 3986 §5.2.4)
                directory = directory[:cut + 1]
            self._above[levels] = directory
        return directory

    def _context(self, raw):
        first = raw[0]  # resolve() has answered "" already
        if first == "/":
            return self.scheme if raw[1:2] == "/" else self.origin
        if first.isalnum() or first in "._-~%":
            if ":" not in raw:
                return self.directory
            if _ABSOLUTE_URL.match(raw):
                return ""
        return self.base  # anything else may depend on the whole base

    def resolve(self, raw):
        if not raw or raw[0] == "#":
            return None  # the page itself, which normalize_url() does not count as a link
        plain = _PLAIN_LINK.match(raw)
        if plain is not None:
            from_root, dots, path, query = plain.groups()
            if "/." not in path and "//" not in path:  # see _PLAIN_LINK
                if from_root:
                    url = self.origin + "/" + path
                elif "../" in dots:
                    url = self._up(dots.count("../")) + path
                else:
                    url = self.directory + path
                return url + query if query else url
        key = (self._context(raw), raw)
        cache = self._cache
        result = cache.get(key, cache)
        if result is cache:
            try:
                result = normalize_url(raw, self.base)
            except ValueError as error:  # kept as its message: the reason it is invalid
                result = InvalidURL(str(error))
            if len(cache) >= self.MAX_ENTRIES:
                cache.clear()
            cache[key] = result
        return result


_ABSOLUTE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# A relative link of this shape resolves by concatenation: its origin or
# directory, then the path and query, without the fragment. Its
# characters are ones normalization keeps as they are; past the leading
# "./" and "../" (which resolution applies to the base's directory) it
# has no "/." and no "//": no empty segment and no segment that starts
# with a dot (so no dot-segment; ".well-known" takes the slow path too).
# resolve() checks those two with "in" (measured: 500 to 5,500
# instructions a link less than a pattern that matched segment by segment).
# Most links on most sites look like this; resolving them here takes a
# fifth of the time normalize_url() does, and keeps them out of the cache.
_PLAIN_LINK = re.compile(r"""(/?)((?:\.\.?/)*)([A-Za-z0-9_~-][A-Za-z0-9._~/-]*)
    (\?[A-Za-z0-9._~=&-]*|)(?:\#.*|)\Z""", re.S | re.X)


if __name__ == "__main__":
    sys.exit(main())
