"""`ebbtide eval`: scenarios, baselines, the run and its report. A room of its own: the
product (`app.services`, `app.api`, `app.store`, …) never imports it."""
