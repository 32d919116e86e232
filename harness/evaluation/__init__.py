"""Play policies on identical episodes and report them: ``evaluate`` runs them, ``results`` holds
what a run found (its tables' columns), ``statistics`` the day bootstrap, ``timeline`` records one
episode site by site while it is played, and ``figures`` (with ``timeline_figure``) draws."""
