from django.apps import AppConfig


class LeagueConfig(AppConfig):
    name = "league"

    def ready(self) -> None:
        # Pause/resume/cancel/reinstate live in their own module; they join the admin here.
        from league import admin_actions

        admin_actions.install()
