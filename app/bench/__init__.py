"""`ebbtide bench`: what Ebbtide adds to a turn, against the floor. A room of its own: the
product (`app.services`, `app.api`, `app.store`, …) never imports it; `app.main` mounts the
floor endpoint from here only when `EBBTIDE_FLOOR_ENDPOINT` is on."""
