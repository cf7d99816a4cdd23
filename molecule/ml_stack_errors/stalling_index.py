"""A package index that serves its pages and never a file: it answers every request for a page in the directory
it is given and keeps each request for a wheel open without a byte of answer, as an index whose storage stopped
answering does. Arguments: PORT DIRECTORY."""
import functools
import http.server
import sys
import threading


class StallingHandler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path.split("#", 1)[0].endswith(".whl"):
            threading.Event().wait()
        super().do_GET()


server = http.server.ThreadingHTTPServer(
    ("127.0.0.1", int(sys.argv[1])), functools.partial(StallingHandler, directory=sys.argv[2]))
server.daemon_threads = True
server.serve_forever()
