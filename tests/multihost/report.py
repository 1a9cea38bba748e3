"""The scenarios' one channel back to the harness: a tagged JSON object on stdout.

A host's ranks share one pipe for stdout and stderr. `emit` writes its line in one write (a pipe
keeps a write under PIPE_BUF whole); `tagged` finds tags anywhere in a line, since a rank's line
may follow another's unfinished log line."""
import json
import os
import select


def emit(tag, obj):
    line = f"{tag} {json.dumps(obj)}\n".encode()
    assert len(line) <= select.PIPE_BUF, f"a {tag} line of {len(line)} bytes would not be written whole"
    os.write(1, line)


def tagged(out, tag):
    """The objects emitted under `tag` in a run's output, in order."""
    found, decoder, mark = [], json.JSONDecoder(), tag + " {"
    for line in out.splitlines():
        at = line.find(mark)
        while at >= 0:
            obj, end = decoder.raw_decode(line, at + len(tag) + 1)
            found.append(obj)
            at = line.find(mark, end)
    return found
