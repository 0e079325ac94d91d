# Once the switch of Event.payload, MatchResult.details and MatchResult.log to a custom JSON field
# (same column, state only). The project is back on Django's JSONField, so this migration now
# restates the fields as 0001 made them: a no-op kept so that databases which applied it keep
# their migration history in step.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("league", "0002_league_round_pause"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="payload",
                    field=models.JSONField(default=dict),
                ),
                migrations.AlterField(
                    model_name="matchresult",
                    name="details",
                    field=models.JSONField(default=dict, help_text="Choices, drawn number, rounds, reasons."),
                ),
                migrations.AlterField(
                    model_name="matchresult",
                    name="log",
                    field=models.JSONField(
                        default=list, help_text="The referee's ordered message log (for the replay)."
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
